package sqlstore

import (
	"fmt"
	"strings"
)

// Column lists, in the order the scan functions read them.
const (
	projectCols     = `id, created_at, storage_quota`
	tokenCols       = `id, hash, project_id, name, created_at, expires_at, revoked_at, last_used_at`
	reservationCols = `id, project_id, region, gpu_type, created_at`
	machineCols     = `id, region, gpu_type, gpus, reservation_id, out_of_service, cooldown_until, created_at,
		failures, out_of_service_reason, maintenance_at, claimed_by, preempt_at`
	// clusterWriteCols are the columns CreateCluster writes; clusterCols
	// adds kube_attached_at, which only SetKubeconfig writes, and access,
	// which only SetAccess writes (SetKubeconfig clears it). The sealed
	// kubeconfig is never among the columns read into a domain.Cluster.
	clusterWriteCols = `id, name, project_id, region, gpu_type, type, billing_type, num_gpus,
		desired_preemptible_gpus, weight, status, unfulfilled, unfulfilled_message, deleting,
		node_seq, created_at, deleted_at, unmet_since, max_preemptible_gpus, requested_preemptible_gpus,
		preemptible_gpu_types, preemptible_strategy, max_preemptible_price, starts_at, active_at`
	clusterCols = clusterWriteCols + `, kube_attached_at, access`
	nodeCols    = `id, cluster_id, machine_id, name, class, gpus, state, created_at, ready_at,
		drain_started_at, deadline, drain_cause, notified, drained_at, outcome, removed_at, last_error,
		cleanup_pending, provisioning_at, class_since, gpu_type`
	eventCols = `seq, id, cluster_id, node_id, node_name, reason, message, ts, deadline`
	usageCols = `node_id, node_name, cluster_id, cluster_name, project_id, region, gpu_type, class,
		billing_type, reservation_id, gpus, start_at, end_at, final, max_rate_micros`
	priceCols = `id, kind, region, gpu_type, reservation_id, value, effective_from, created_at`

	// oldestFirst is the order of every listing but events. NULLS FIRST
	// because the backends disagree on where NULL sorts by default and a
	// zero time is the earliest time.
	oldestFirst = ` ORDER BY created_at NULLS FIRST, id`
)

// queries are the statements of the store, rebound for the dialect once.
type queries struct {
	getProject, listProjects, createProject      string
	tokenByHash, createToken                     string
	getToken, listTokensOf, listOperatorTokens   string
	updateToken, touchToken, deleteToken         string
	listReservations, createReservation          string
	getMachine, listMachines, createMachine      string
	updateMachine                                string
	getCluster, listClusters, listClustersOf     string
	getClusterRecord                             string
	createCluster, updateCluster                 string
	getKubeconfig, setKubeconfig, dropKubeconfig string
	setAccess                                    string
	listNodes, createNode, updateNode            string
	listEvents, replaceEvent                     string
	pruneEvents, eventLock                       string
	listUsage, putUsage, listPrices, createPrice string
}

func buildQueries(d Dialect) queries {
	r := func(q string) string { return rebind(d, q) }
	return queries{
		getProject:    r(`SELECT ` + projectCols + ` FROM projects WHERE id = ?`),
		listProjects:  r(`SELECT ` + projectCols + ` FROM projects` + oldestFirst),
		createProject: r(`INSERT INTO projects (` + projectCols + `) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`),

		tokenByHash:        r(`SELECT ` + tokenCols + ` FROM tokens WHERE hash = ?`),
		createToken:        r(`INSERT INTO tokens (` + tokenCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		getToken:           r(`SELECT ` + tokenCols + ` FROM tokens WHERE id = ?`),
		listTokensOf:       r(`SELECT ` + tokenCols + ` FROM tokens WHERE project_id = ?` + oldestFirst),
		listOperatorTokens: r(`SELECT ` + tokenCols + ` FROM tokens WHERE project_id IS NULL` + oldestFirst),
		updateToken:        r(`UPDATE tokens SET name = ?, expires_at = ?, revoked_at = ? WHERE id = ?`),
		touchToken:         r(`UPDATE tokens SET last_used_at = ? WHERE hash = ? AND (last_used_at IS NULL OR last_used_at < ?)`),
		deleteToken:        r(`DELETE FROM tokens WHERE id = ?`),

		listReservations:  r(`SELECT ` + reservationCols + ` FROM reservations` + oldestFirst),
		createReservation: r(`INSERT INTO reservations (` + reservationCols + `) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),

		getMachine:    r(`SELECT ` + machineCols + ` FROM machines WHERE id = ?`),
		listMachines:  r(`SELECT ` + machineCols + ` FROM machines` + oldestFirst),
		createMachine: r(`INSERT INTO machines (` + machineCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		updateMachine: r(`UPDATE machines SET region = ?, gpu_type = ?, gpus = ?, reservation_id = ?,
			out_of_service = ?, cooldown_until = ?, created_at = ?, failures = ?, out_of_service_reason = ?,
			maintenance_at = ?, claimed_by = ?, preempt_at = ? WHERE id = ?`),

		getCluster:       r(`SELECT ` + clusterCols + ` FROM clusters WHERE id = ? AND deleted_at IS NULL`),
		getClusterRecord: r(`SELECT ` + clusterCols + ` FROM clusters WHERE id = ?`),
		listClusters:     r(`SELECT ` + clusterCols + ` FROM clusters WHERE deleted_at IS NULL` + oldestFirst),
		listClustersOf:   r(`SELECT ` + clusterCols + ` FROM clusters WHERE deleted_at IS NULL AND project_id = ?` + oldestFirst),
		createCluster:    r(`INSERT INTO clusters (` + clusterWriteCols + `) VALUES ` + clusterRow + ` ON CONFLICT DO NOTHING`),
		updateCluster:    r(updateSet(`clusters`, clusterSet)),
		getKubeconfig:    r(`SELECT kubeconfig FROM clusters WHERE id = ? AND deleted_at IS NULL`),
		setKubeconfig:    r(`UPDATE clusters SET kubeconfig = ?, kube_attached_at = ?, access = '' WHERE id = ? AND deleted_at IS NULL`),
		setAccess:        r(`UPDATE clusters SET access = ? WHERE id = ? AND deleted_at IS NULL`),
		// dropKubeconfig runs when a cluster is fully deleted: its
		// credentials do not outlive it.
		dropKubeconfig: r(`UPDATE clusters SET kubeconfig = NULL, kube_attached_at = NULL, access = '' WHERE id = ?`),

		// listNodes is completed by ListNodes with the filter's WHERE
		// clause and oldestFirst, then rebound. GetNode is in history.go.
		listNodes: `SELECT ` + nodeCols + ` FROM nodes`,
		// metered starts set if the node's final record is already there.
		createNode: r(`INSERT INTO nodes (` + nodeCols + `, metered) VALUES ` + nodeRow + ` ON CONFLICT DO NOTHING`),
		updateNode: r(updateSet(`nodes`, nodeSet)),

		// listEvents is completed like listNodes.
		listEvents: `SELECT ` + eventCols + ` FROM events WHERE seq > ?`,
		// Events without a timestamp count as older than any time, as the
		// zero time.Time is.
		pruneEvents: r(`DELETE FROM events WHERE ts IS NULL OR ts < ?`),
		// replaceEvent inserts an event, replacing the one of its key, in
		// one statement (see replaceEvents).
		replaceEvent: replaceEvent(d),
		eventLock:    d.EventLock,

		// listUsage is completed by ListUsage.
		listUsage:   `SELECT ` + usageCols + ` FROM usage`,
		putUsage:    r(`INSERT INTO usage (` + usageCols + `) VALUES ` + usageRow + usageUpsert),
		listPrices:  r(`SELECT ` + priceCols + ` FROM prices ORDER BY effective_from NULLS FIRST, id`),
		createPrice: r(`INSERT INTO prices (` + priceCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
	}
}

func replaceEvent(d Dialect) string {
	if q := replaceEvents(d, 1); q != "" {
		return q + ` RETURNING seq`
	}
	return ""
}

// replaceEvents inserts rows events, each replacing the event of its key,
// in one statement (see Dialect.UpsertDefault and InsertOrReplace); ""
// where the dialect cannot. The replaced event takes a new Seq, as a
// delete and an insert give it: readers after its old Seq see it again.
func replaceEvents(d Dialect, rows int) string {
	values := strings.TrimSuffix(strings.Repeat(eventRow+", ", rows), ", ")
	switch {
	case d.UpsertDefault:
		return rebind(d, `INSERT INTO events (`+eventInsertCols+`) VALUES `+values+eventUpsert)
	case d.InsertOrReplace:
		return rebind(d, `INSERT OR REPLACE INTO events (`+eventInsertCols+`) VALUES `+values)
	}
	return ""
}

// eventRow is one row of an event insert; eventUpsert the clause that
// replaces the event of the same key, shared with AddEvents.
const (
	eventInsertCols = `id, cluster_id, node_id, node_name, reason, message, ts, deadline`
	eventRow        = `(?, ?, ?, ?, ?, ?, ?, ?)`
	eventUpsert     = `
		ON CONFLICT (cluster_id, node_id, reason) DO UPDATE SET seq = DEFAULT, id = excluded.id,
			node_name = excluded.node_name, message = excluded.message, ts = excluded.ts, deadline = excluded.deadline`
)

// usageRow is one row of putUsage's VALUES; usageUpsert its conflict
// clause, shared with the bulk statements of PutUsages.
const (
	usageRow    = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	usageUpsert = `
			ON CONFLICT (node_id, start_at) DO UPDATE SET node_name = excluded.node_name, cluster_id = excluded.cluster_id,
			cluster_name = excluded.cluster_name, project_id = excluded.project_id, region = excluded.region,
			gpu_type = excluded.gpu_type, class = excluded.class, billing_type = excluded.billing_type,
			reservation_id = excluded.reservation_id, gpus = excluded.gpus, start_at = excluded.start_at,
			end_at = excluded.end_at, final = excluded.final, max_rate_micros = excluded.max_rate_micros
			WHERE NOT usage.final AND (excluded.final OR excluded.end_at >= usage.end_at)`
)

// nodeSet and clusterSet are the columns UpdateNode and UpdateCluster
// write, in the order of their arguments (the row's id follows), with
// their PostgreSQL types: the bulk updates read them from a VALUES list,
// whose parameters PostgreSQL must be told the types of.
var (
	nodeSet = []typedCol{{"cluster_id", "text"}, {"machine_id", "text"}, {"name", "text"}, {"class", "text"},
		{"gpus", "bigint"}, {"state", "text"}, {"created_at", "timestamptz"}, {"ready_at", "timestamptz"},
		{"drain_started_at", "timestamptz"}, {"deadline", "timestamptz"}, {"drain_cause", "text"},
		{"notified", "boolean"}, {"drained_at", "timestamptz"}, {"outcome", "text"}, {"removed_at", "timestamptz"},
		{"last_error", "text"}, {"cleanup_pending", "boolean"}, {"provisioning_at", "timestamptz"},
		{"class_since", "timestamptz"}, {"gpu_type", "text"}}
	clusterSet = []typedCol{{"name", "text"}, {"project_id", "text"}, {"region", "text"}, {"gpu_type", "text"},
		{"type", "text"}, {"billing_type", "text"}, {"num_gpus", "bigint"}, {"desired_preemptible_gpus", "bigint"},
		{"weight", "bigint"}, {"status", "text"}, {"unfulfilled", "text"}, {"unfulfilled_message", "text"},
		{"deleting", "boolean"}, {"node_seq", "bigint"}, {"created_at", "timestamptz"},
		{"deleted_at", "timestamptz"}, {"unmet_since", "timestamptz"}, {"max_preemptible_gpus", "bigint"},
		{"requested_preemptible_gpus", "bigint"}, {"preemptible_gpu_types", "text"}, {"preemptible_strategy", "text"},
		{"max_preemptible_price", "text"}, {"starts_at", "timestamptz"}, {"active_at", "timestamptz"}}
)

type typedCol struct{ name, typ string }

// updateSet is the UPDATE statement of table that writes cols by id.
func updateSet(table string, cols []typedCol) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		set[i] = c.name + " = ?"
	}
	return `UPDATE ` + table + ` SET ` + strings.Join(set, ", ") + ` WHERE id = ?`
}

// bulkUpdateSet is updateSet for rows rows at once: the values come from
// a VALUES list (columns column1, column2, … in both dialects), id last.
func bulkUpdateSet(table string, cols []typedCol, rows int) string {
	set := make([]string, len(cols))
	one := make([]string, len(cols)+1)
	for i, c := range cols {
		set[i] = fmt.Sprintf("%s = v.column%d", c.name, i+1)
		one[i] = "CAST(? AS " + c.typ + ")"
	}
	one[len(cols)] = "CAST(? AS text)"
	row := "(" + strings.Join(one, ", ") + ")"
	return fmt.Sprintf(`UPDATE %s AS t SET %s FROM (VALUES %s) AS v WHERE t.id = v.column%d`,
		table, strings.Join(set, ", "), strings.TrimSuffix(strings.Repeat(row+", ", rows), ", "), len(cols)+1)
}

// clusterRow is one row of createCluster's VALUES, shared with
// CreateClusters.
const clusterRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// nodeRow is one row of createNode's VALUES, shared with CreateNodes:
// metered starts set if the final record of the node's current period is
// already there.
const nodeRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
			EXISTS (SELECT 1 FROM usage WHERE node_id = ? AND final AND start_at >= ?))`
