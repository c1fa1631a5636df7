package domain

// DefaultStorageQuota is a project's storage quota when the operator set
// none: 1 GiB of what its own input makes the server keep.
const DefaultStorageQuota = 1 << 30

// StorageUse is what one table keeps of a project's input: its rows and
// their bytes (the text the tenant's input filled, plus StorageRowBytes
// a row).
type StorageUse struct {
	ProjectID, Table string
	Rows, Bytes      int64
}

// StorageRowBytes is what a row costs beside its text, in the count.
const StorageRowBytes = 64

// StorageTables are the tables a project's storage counts: what its
// tenant's own input makes the server keep. Lifecycle events, notices and
// their deliveries, usage and anything billing reads are never counted,
// never refused.
var StorageTables = []string{"work_spans", "budgets", "budget_alerts", "webhook_endpoints", "webhook_deliveries", "tokens"}
