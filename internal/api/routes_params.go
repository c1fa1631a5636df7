package api

import "github.com/sparecap/sparecap/internal/openapi"

// The query parameters several routes share.
var (
	qRegion    = openapi.Param{Name: "region", Type: "string", Description: "A region of the fleet."}
	qGPUType   = openapi.Param{Name: "gpu_type", Type: "string", Description: "A GPU type of the region."}
	qRegionReq = openapi.Param{Name: "region", Type: "string", Required: true, Description: "A region of the fleet."}
	qTypeReq   = openapi.Param{Name: "gpu_type", Type: "string", Required: true, Description: "A GPU type of the region."}
	qProject   = openapi.Param{Name: "project_id", Type: "string", Description: "Only this project (the operator's token); a project token may name only its own."}
	qFrom      = openapi.Param{Name: "from", Type: "date-time", Description: "Start of the window, RFC 3339 (send a + offset as %2B). Default: 7 days before to."}
	qTo        = openapi.Param{Name: "to", Type: "date-time", Description: "End of the window, excluded. Default: now."}
	qFromReq   = openapi.Param{Name: "from", Type: "date-time", Required: true, Description: "Start of the period, RFC 3339 (send a + offset as %2B)."}
	qToReq     = openapi.Param{Name: "to", Type: "date-time", Required: true, Description: "End of the period, excluded; at most 366 days after from."}
	qFormat    = openapi.Param{Name: "format", Type: "string", Enum: []string{"json", "csv"}, Description: "json (the default) or csv; Accept: text/csv also selects CSV."}
	qCursor    = openapi.Param{Name: "cursor", Type: "string", Description: "The next_cursor of the page before: the items after it."}
	qRunStart  = openapi.Param{Name: "run_start", Type: "date-time", Description: "When the job starts (default now): the rate is then the pool's in those hours of the week."}
	qRunHours  = openapi.Param{Name: "run_hours", Type: "number", Description: "How many hours the job runs, 1 to 168 (default 24)."}
	qRate      = openapi.Param{Name: "rate_percent_per_hour", Type: "number", Description: "A preemption rate to plan with instead of the measured one, 0 to 1000: a what-if."}
)

// planQuery is the job GET /v1/plan and /v1/plan/options plan.
var planQuery = []openapi.Param{
	{Name: "gpu_hours", Type: "number", Required: true, Description: "The job's work at full speed: above 0, at most 10,000,000."},
	{Name: "gpus", Type: "integer", Description: "GPUs the job runs on at once (a gang): a multiple of 8 up to 100,000; default 8."},
	{Name: "checkpoint_seconds", Type: "number", Description: "How long one checkpoint takes (default 0)."},
	{Name: "restart_seconds", Type: "number", Description: "How long the job needs after an interruption before it progresses again (default 0)."},
	{Name: "interval_seconds", Type: "number", Description: "The checkpoint interval to plan with; default the planner's for the rate and deadline."},
	{Name: "checkpoint_at_notice", Type: "boolean", Description: "true: the job checkpoints on its notice."},
	{Name: "deadline_hours", Type: "number", Description: "The time from now by which the job must end; adds deadline."},
	qRate, qRunStart, qRunHours,
}

// usageColumns are the columns of a usage or invoice CSV; workColumns
// follow them when the lines are the work's (cost allocation).
var usageColumns = []string{"project_id", "cluster_id", "cluster_name", "node_id", "node_name", "compute_class", "region", "gpu_type",
	"gpus", "start", "end", "billed_seconds", "gpu_seconds", "rate_per_gpu_hour", "on_demand_rate_per_gpu_hour",
	"amount_usd", "on_demand_amount_usd"}

var workColumns = []string{"group", "idle"}
