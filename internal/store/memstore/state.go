package memstore

// state is one version of the whole database: every table and index, as
// trees, and the counters the SQL backends keep in tables (AUTOINCREMENT
// sequences, the leader lease, the webhook cursor). Copying it copies the
// version, in constant time (see tree).
type state struct {
	catalog
	clusterTables
	nodeTables
	eventTables
	usageTables
	ledgerTables
	spanTables
	webhookTables
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
	}
}
