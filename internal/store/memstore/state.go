package memstore

// state is the whole database: every table and index, as trees, and the
// counters the SQL backends keep in tables. The running Update changes it
// in place; a copy of it with the Update's writes reverted (see tree) is
// the committed version a reader gets while the Update is open.
type state struct {
	catalog
	clusterTables
	nodeTables
	eventTables
	usageTables
	ledgerTables
	spanTables
	webhookTables
	rollupTables
	counters
}

// counters are the values of the database that are no table.
type counters struct {
	// eventSeq, alertSeq and spanSeq are the last event Seq, budget alert
	// Seq and work span ID handed out: like AUTOINCREMENT keys, never
	// handed out twice, even after their row is replaced or pruned.
	eventSeq, alertSeq, spanSeq int64
	// lastRowid is the last row number a node was given. SQLite numbers
	// a row one past the largest in the table, which may be the number of
	// a row deleted since; lastRowid, never handed out twice, orders the
	// rows there are as SQLite's numbers do.
	lastRowid int64
	// liveNodes counts the nodes not removed.
	liveNodes int
	leader
	// cursor is the webhook dispatch cursor (0 before the first).
	cursor int64
}

func newState() *state {
	return &state{
		catalog:       newCatalog(),
		clusterTables: newClusterTables(),
		nodeTables:    newNodeTables(),
		eventTables:   newEventTables(),
		usageTables:   newUsageTables(),
		ledgerTables:  newLedgerTables(),
		spanTables:    newSpanTables(),
		webhookTables: newWebhookTables(),
		rollupTables:  newRollupTables(),
	}
}

// tables are st's trees, every one of them.
func (st *state) tables() []logged {
	return []logged{
		&st.projects, &st.projectOrder, &st.tokens, &st.tokenHashes, &st.tokenOrder, &st.reservations,
		&st.reservationOrder, &st.machines, &st.machineOrder, &st.prices, &st.priceOrder,
		&st.clusters, &st.clusterOrder, &st.projectClusters, &st.clusterNames,
		&st.nodes, &st.nodeKeys, &st.byState, &st.byCluster, &st.byMachine, &st.byName, &st.unmetered, &st.metered,
		&st.cleanup, &st.removed, &st.activeOn, &st.pendingOn, &st.rowidOf,
		&st.history, &st.historyOrder, &st.historyByCluster, &st.historyByMachine,
		&st.events, &st.eventKeys, &st.eventsOf, &st.eventTimes,
		&st.usage, &st.usageByStart, &st.usageByProject, &st.usageByCluster, &st.usageOpen,
		&st.lostWork, &st.lostWorkOrder, &st.lostWorkByProject, &st.budgets, &st.budgetNames, &st.alerts, &st.alertKeys,
		&st.spans, &st.spanKeys, &st.spansOpen, &st.spansByProject, &st.spansByCluster,
		&st.endpoints, &st.endpointNames, &st.endpointOrder, &st.projectEndpoints, &st.messages, &st.deliveries,
		&st.endpointDeliveries, &st.messageDeliveries, &st.pendingDeliveries,
		&st.rollups, &st.dirty, &st.rollupMark,
	}
}
