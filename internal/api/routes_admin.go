package api

import (
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/openapi"
)

// scope is where a project's own objects are served: the caller's
// under /v1/NAME, any project's for the operator under
// /v1/admin/projects/{project}/NAME (id names the operation: listTokens,
// listProjectTokens).
type scope struct {
	prefix, id string
	wrap       func(route, handler) route
}

func scopes(name string) []scope {
	return []scope{{"/v1/" + name, "", route.token}, {"/v1/admin/projects/{project}/" + name, "Project", route.admin}}
}

// tokenRoutes are a project's tokens.
func (s *Server) tokenRoutes() []route {
	var out []route
	for _, scope := range scopes("tokens") {
		out = append(out, tagged("tokens",
			scope.wrap(s.on("GET", scope.prefix, "list"+scope.id+"Tokens", "List tokens"), s.listTokens).
				ok(200, apiv1.TokenList{}).errs(403, 404),
			scope.wrap(s.on("POST", scope.prefix, "create"+scope.id+"Token", "Issue a token (its secret is in this answer only)"), s.createToken).
				body(apiv1.CreateTokenRequest{}).optional().ok(201, apiv1.Token{}).errs(403, 404, 409),
			scope.wrap(s.on("DELETE", scope.prefix+"/{token}", "revoke"+scope.id+"Token", "Revoke a token"), s.revokeToken).
				ok(200, apiv1.Token{}).errs(403, 404, 409),
			scope.wrap(s.on("POST", scope.prefix+"/{token}/rotate", "rotate"+scope.id+"Token", "Replace a token's secret"), s.rotateToken).
				ok(201, apiv1.Token{}).errs(403, 404, 409),
		)...)
	}
	return out
}

// webhookRoutes are a project's webhook endpoints.
func (s *Server) webhookRoutes() []route {
	var out []route
	for _, scope := range scopes("webhooks") {
		p, w := scope.prefix, scope.wrap
		out = append(out, tagged("webhooks",
			w(s.on("GET", p, "list"+scope.id+"Webhooks", "List webhook endpoints"), s.listWebhooks).ok(200, apiv1.WebhookEndpointList{}).errs(400, 404),
			w(s.on("POST", p, "create"+scope.id+"Webhook", "Add a webhook endpoint (its signing secret is in this answer only)"), s.createWebhook).
				body(apiv1.CreateWebhookRequest{}).ok(201, apiv1.WebhookEndpoint{}).errs(403, 404, 409),
			w(s.on("GET", p+"/{webhook}", "get"+scope.id+"Webhook", "Get a webhook endpoint"), s.getWebhook).ok(200, apiv1.WebhookEndpoint{}).errs(400, 404),
			w(s.on("PATCH", p+"/{webhook}", "update"+scope.id+"Webhook", "Change a webhook endpoint"), s.updateWebhook).
				body(apiv1.UpdateWebhookRequest{}).ok(200, apiv1.WebhookEndpoint{}).errs(404, 409),
			w(s.on("DELETE", p+"/{webhook}", "delete"+scope.id+"Webhook", "Delete a webhook endpoint"), s.deleteWebhook).ok(200, apiv1.WebhookEndpoint{}).errs(400, 404),
			w(s.on("POST", p+"/{webhook}/rotate", "rotate"+scope.id+"WebhookSecret", "Replace an endpoint's signing secret"), s.rotateWebhook).
				body(apiv1.RotateWebhookSecretRequest{}).optional().ok(200, apiv1.WebhookEndpoint{}).errs(404),
			w(s.on("POST", p+"/{webhook}/test", "test"+scope.id+"Webhook", "Send a test delivery"), s.testWebhook).ok(202, apiv1.WebhookDelivery{}).errs(400, 404, 409),
			w(s.on("GET", p+"/{webhook}/deliveries", "list"+scope.id+"WebhookDeliveries", "An endpoint's recent deliveries"), s.webhookDeliveries).
				q(openapi.Param{Name: "state", Type: "string", Enum: []string{"pending", "delivered", "failed"}, Description: "Only deliveries in this state."},
					openapi.Param{Name: "limit", Type: "integer", Description: "1 to 1000 (default 100)."}).
				ok(200, apiv1.WebhookDeliveryList{}).errs(400, 404),
		)...)
	}
	return out
}

func (s *Server) projectRoutes() []route {
	return tagged("admin",
		s.on("POST", "/v1/admin/projects", "createProject", "Create a project and its first token").admin(s.createProject).
			body(apiv1.CreateProjectRequest{}).ok(201, apiv1.Project{}).errs(409),
		s.on("GET", "/v1/admin/projects", "listProjects", "List the projects").admin(s.listProjects).ok(200, apiv1.ProjectList{}),
		s.on("PUT", "/v1/admin/projects/{project}/storage-quota", "setStorageQuota", "Set a project's storage quota").admin(s.setStorageQuota).
			body(apiv1.SetStorageQuotaRequest{}).empty(204, "Set.").errs(404),
		s.on("PATCH", "/v1/admin/clusters/{id}", "setClusterWeight", "Set a cluster's fair-share weight").admin(s.setClusterWeight).
			body(apiv1.SetClusterWeightRequest{}).ok(200, apiv1.Cluster{}).errs(404, 409),
	)
}

func (s *Server) fleetRoutes() []route {
	return tagged("admin",
		s.on("POST", "/v1/admin/machines", "createMachines", "Add machines to the fleet").admin(s.createMachines).
			body(apiv1.CreateMachinesRequest{}).ok(201, apiv1.MachineList{}).errs(409),
		s.on("GET", "/v1/admin/machines", "listMachines", "List the fleet's machines").admin(s.listMachines).
			q(qRegion, qGPUType, openapi.Param{Name: "state", Type: "string", Enum: []string{"free", "provisioning", "ready", "draining", "removing", "out_of_service"}, Description: "Only machines in this state."}).
			ok(200, apiv1.MachineList{}).errs(400),
		s.on("PATCH", "/v1/admin/machines/{id}", "updateMachine", "Take a machine out of service, or plan its maintenance").admin(s.updateMachine).
			body(apiv1.UpdateMachineRequest{}).ok(200, apiv1.Machine{}).errs(404, 409),
		s.on("POST", "/v1/admin/reservations", "createReservation", "Reserve machines for a project").admin(s.createReservation).
			body(apiv1.CreateReservationRequest{}).ok(201, apiv1.Reservation{}).errs(404, 409),
		s.on("GET", "/v1/admin/reservations", "listReservations", "List the reservations").admin(s.listReservations).ok(200, apiv1.ReservationList{}),
		s.on("GET", "/v1/admin/lending", "getLending", "What the fleet lent and earned").admin(s.lending).
			q(qFrom, qTo).ok(200, apiv1.Lending{}).errs(400),
		s.on("GET", "/v1/admin/prices", "listPrices", "The price book").admin(s.listPrices).ok(200, apiv1.PriceBook{}),
		s.on("POST", "/v1/admin/prices", "createPrice", "Add a price from a time on").admin(s.createPrice).
			body(apiv1.CreatePriceRequest{}).ok(201, apiv1.PriceEntry{}).errs(409),
	)
}

func (s *Server) attachRoutes() []route {
	return tagged("admin",
		s.on("PUT", "/v1/admin/clusters/{id}/kubeconfig", "attachKubeconfig", "Attach a cluster's Kubernetes API").attach("kubeconfig", s.attachKubeconfig).
			body(apiv1.AttachKubeconfigRequest{}).ok(200, apiv1.Cluster{}).errs(403, 404, 409),
		s.on("DELETE", "/v1/admin/clusters/{id}/kubeconfig", "detachKubeconfig", "Detach a cluster's Kubernetes API").attach("kubeconfig", s.detachKubeconfig).
			ok(200, apiv1.Cluster{}).errs(400, 403, 404, 409),
		s.on("PUT", "/v1/admin/clusters/{id}/slurm", "attachSlurm", "Attach a Slurm cluster's slurm.conf").attach("slurm.conf", s.attachSlurm).
			body(apiv1.AttachSlurmRequest{}).ok(200, apiv1.Cluster{}).errs(403, 404, 409),
		s.on("DELETE", "/v1/admin/clusters/{id}/slurm", "detachSlurm", "Detach a Slurm cluster's slurm.conf").attach("slurm.conf", s.detachSlurm).
			ok(200, apiv1.Cluster{}).errs(400, 403, 404, 409),
	)
}

func (s *Server) simulationRoutes() []route {
	return tagged("planning",
		s.on("POST", "/v1/simulations", "createSimulation", "Run a simulation in the background").admin(s.createSimulation).
			body(apiv1.CreateSimulationRequest{}).ok(202, apiv1.Simulation{}).errs(409),
		s.on("GET", "/v1/simulations", "listSimulations", "List the simulations").admin(s.listSimulations).ok(200, apiv1.SimulationList{}),
		s.on("GET", "/v1/simulations/{id}", "getSimulation", "A simulation's status and result").admin(s.getSimulation).ok(200, apiv1.Simulation{}).errs(404),
		s.on("POST", "/v1/simulations/{id}/cancel", "cancelSimulation", "Cancel a simulation").admin(s.cancelSimulation).ok(200, apiv1.Simulation{}).errs(404, 409),
	)
}
