package api

import (
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/openapi"
)

func (s *Server) usageRoutes() []route {
	qCluster := openapi.Param{Name: "cluster_id", Type: "string", Description: "Only this cluster."}
	return tagged("billing",
		s.on("GET", "/v1/usage", "getUsage", "Metered usage and its cost over a period").token(s.usage).
			q(qFromReq, qToReq, qProject, qCluster,
				openapi.Param{Name: "group_by", Type: "string", Description: "node (the default), cluster, compute_class, gpu_type, day, namespace, job, account, work or label:<key>."}, qFormat).
			ok(200, apiv1.Usage{}).csv(usageColumns, workColumns).errs(400, 403, 404).
			doc("The CSV has the columns of x-csv-columns, then those of x-csv-more-columns when grouped by the work (namespace, job, account, work, label:<key>); its last rows are TOTAL and SAVINGS."),
		s.on("GET", "/v1/invoices", "getInvoice", "A project's invoice for a month").token(s.invoice).
			q(openapi.Param{Name: "month", Type: "string", Description: "YYYY-MM: the period is that month, UTC."}, qFrom, qTo, qProject, qCluster, qFormat).
			ok(200, apiv1.Invoice{}).csv(usageColumns, workColumns).errs(400, 403, 404),
		s.on("GET", "/v1/prices", "listRates", "The prices in force now").token(s.rates).
			ok(200, apiv1.Rates{}),
		s.on("GET", "/v1/storage", "getStorage", "What each project keeps, against its quota").token(s.storage).
			q(qProject).ok(200, apiv1.Storage{}).errs(403, 404),
	)
}

func (s *Server) budgetRoutes() []route {
	return tagged("budgets",
		s.on("GET", "/v1/budgets", "listBudgets", "The project's budgets and their month so far").token(s.listBudgets).
			q(qProject).ok(200, apiv1.BudgetList{}).errs(400, 404),
		s.on("POST", "/v1/budgets", "createBudget", "Create a monthly budget").token(s.budgetWrite(s.createBudget)).
			body(apiv1.CreateBudgetRequest{}).q(qProject).ok(201, apiv1.Budget{}).errs(403, 404, 409),
		s.on("DELETE", "/v1/budgets/{id}", "deleteBudget", "Delete a budget").token(s.budgetWrite(s.deleteBudget)).
			q(qProject).empty(204, "Deleted.").errs(400, 404),
		s.on("GET", "/v1/budgets/alerts", "listBudgetAlerts", "The alerts budgets raised").token(s.budgetAlerts).
			q(qProject, openapi.Param{Name: "month", Type: "string", Description: "YYYY-MM: that month's alerts only."},
				openapi.Param{Name: "order", Type: "string", Enum: []string{"oldest", "newest"}, Description: "oldest (the default) or newest first."},
				openapi.Param{Name: "limit", Type: "integer", Description: "1 to 1000 (default 1000)."}, qCursor).
			ok(200, apiv1.BudgetAlerts{}).errs(400, 404),
	)
}
