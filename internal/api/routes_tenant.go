package api

import (
	"net/http"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/openapi"
)

func (s *Server) clusterRoutes() []route {
	return tagged("clusters",
		s.on("POST", "/v1/clusters", "createCluster", "Create a cluster").token(s.createCluster).
			body(apiv1.CreateClusterRequest{}).ok(201, apiv1.Cluster{}).errs(403, 404, 409),
		s.on("GET", "/v1/clusters", "listClusters", "List the clusters").token(s.listClusters).
			q(qProject).ok(200, apiv1.ClusterList{}),
		s.on("GET", "/v1/clusters/{id}", "getCluster", "Get a cluster and its nodes").token(s.getCluster).
			ok(200, apiv1.Cluster{}).errs(404),
		s.on("PATCH", "/v1/clusters/{id}", "updateCluster", "Change a cluster's targets, types, strategy, cap or booking").token(s.updateCluster).
			body(apiv1.UpdateClusterRequest{}).ok(200, apiv1.Cluster{}).errs(404, 409),
		s.on("DELETE", "/v1/clusters/{id}", "deleteCluster", "Delete a cluster (drains its nodes)").token(s.deleteCluster).
			ok(202, apiv1.Cluster{}).empty(204, "The cluster was already gone or had no nodes left.").errs(404, 409),
		s.on("POST", "/v1/clusters/{id}/nodes/{node}/convert", "convertNode", "Convert a ready preemptible node to standard").token(s.convertNode).
			body(apiv1.ConvertNodeRequest{}).ok(200, apiv1.Cluster{}).errs(404, 409),
	)
}

func (s *Server) eventRoutes() []route {
	return tagged("events",
		s.on("GET", "/v1/clusters/{id}/events", "listEvents", "A cluster's lifecycle events, a page or a stream").token(s.events).
			q(qCursor, openapi.Param{Name: "limit", Type: "integer", Description: "1 to 1000 (default 100); ignored with watch=true."},
				openapi.Param{Name: "watch", Type: "boolean", Description: "true: stream the events as server-sent events (text/event-stream), each event's data an Event."}).
			ok(200, apiv1.EventList{}).sse(apiv1.Event{}).errs(400, 404).
			doc("With watch=true the answer is a stream of server-sent events: each has an id (its cursor), the event type lifecycle and the Event as JSON data; a comment line keeps the connection alive. Reconnect with Last-Event-ID or cursor."),
	)
}

func (s *Server) capacityRoutes() []route {
	return tagged("capacity",
		s.on("GET", "/v1/whoami", "whoAmI", "Who the token is").token(func(w http.ResponseWriter, r *http.Request, p principal) {
			writeJSON(w, http.StatusOK, apiv1.WhoAmI{Admin: p.admin, ProjectID: p.project, TokenID: p.tokenID})
		}).ok(200, apiv1.WhoAmI{}),
		s.on("GET", "/v1/capacity", "getCapacity", "The fleet's GPUs by pool and what they are doing").token(s.capacity).
			ok(200, apiv1.CapacityList{}),
		s.on("GET", "/v1/capacity/forecast", "getCapacityForecast", "Spare capacity hour by hour ahead").token(s.capacityForecast).
			q(qRegion, qGPUType, openapi.Param{Name: "hours", Type: "integer", Description: "How many hours, 1 to 168 (default 48)."}).
			ok(200, apiv1.CapacityForecast{}).errs(400),
	)
}

func (s *Server) statsRoutes() []route {
	return tagged("statistics",
		s.on("GET", "/v1/stats/preemptions", "getPreemptionStats", "Preemption rates by pool over a window").token(s.preemptionStats).
			q(qRegion, qGPUType, qFrom, qTo).ok(200, apiv1.PreemptionStatsList{}).errs(400),
		s.on("GET", "/v1/stats/preemptions/week", "getPreemptionWeek", "A pool's preemption rate by hour of the week").token(s.preemptionWeek).
			q(qRegionReq, qTypeReq, qFrom, qTo, openapi.Param{Name: "ahead", Type: "integer", Description: "Forecast hours after to, 0 to 168."}).
			ok(200, apiv1.WeekStats{}).errs(400),
		s.on("GET", "/v1/stats/lost-work", "getLostWork", "Work lost to reclaims, by reclaim, job or cluster").token(s.lostWork).
			q(qFromReq, qToReq, qProject, openapi.Param{Name: "cluster_id", Type: "string", Description: "Only this cluster."},
				openapi.Param{Name: "group_by", Type: "string", Description: "reclaim (the default), job, cluster or month."}).
			ok(200, apiv1.LostWork{}).errs(400, 404),
	)
}

func (s *Server) planRoutes() []route {
	return tagged("planning",
		s.on("GET", "/v1/advice/checkpoint", "getCheckpointAdvice", "The checkpoint interval for a pool's preemption rate").token(s.checkpointAdvice).
			q(qRegionReq, qTypeReq, openapi.Param{Name: "checkpoint_seconds", Type: "number", Required: true, Description: "How long one checkpoint takes, in seconds: above 0, at most 86400."},
				qFrom, qTo, qRunStart, qRunHours).
			ok(200, apiv1.CheckpointAdvice{}).errs(400),
		s.on("GET", "/v1/plan", "getPlan", "What a job costs and takes on preemptible and standard nodes").token(s.jobPlan).
			q(qRegionReq, qTypeReq).q(planQuery...).ok(200, apiv1.Plan{}).errs(400),
		s.on("GET", "/v1/plan/options", "listPlanOptions", "The job planned in every pool, best first").token(s.planOptions).
			q(openapi.Param{Name: "regions", Type: "string", Description: "Comma-separated regions to consider (default all)."},
				openapi.Param{Name: "gpu_types", Type: "string", Description: "Comma-separated GPU types to consider (default all)."}).
			q(planQuery...).ok(200, apiv1.PlanOptions{}).errs(400),
	)
}

func (s *Server) healthRoutes() []route {
	return tagged("health",
		s.on("GET", "/healthz", "healthz", "The process is up").public(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 200, apiv1.Health{Status: "ok"})
		}).ok(200, apiv1.Health{}),
		s.on("GET", "/readyz", "readyz", "The server can serve (its store answers; with HA, its role is known)").public(s.readyz).
			ok(200, apiv1.Health{}).errs(503),
		s.on("GET", "/v1/openapi.json", "getOpenAPI", "This document").public(s.openAPI).
			ok(200, map[string]any{}),
	)
}
