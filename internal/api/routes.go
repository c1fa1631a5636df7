package api

import (
	"net/http"

	"github.com/sparecap/sparecap/internal/openapi"
)

// route is one operation of the API: its contract, which the OpenAPI
// document is built from, and the handler the server registers for it.
// The one list (Server.routeList) does both, so the document cannot lack
// a route the server has, nor the reverse.
type route struct {
	openapi.Op
	s *Server
	h http.Handler
}

// on starts a route; its access and handler come with token, admin,
// attach or public.
func (s *Server) on(method, path, id, summary string) route {
	return route{Op: openapi.Op{Method: method, Path: path, ID: id, Summary: summary}, s: s}
}

func (r route) token(h handler) route {
	r.Access, r.h = openapi.AnyToken, r.s.auth(h)
	return r
}

func (r route) admin(h handler) route {
	r.Access, r.h = openapi.Admin, r.s.admin(h)
	return r
}

// attach is an admin route that sends an attachment (a kubeconfig, a
// slurm.conf) and so answers its own refusals.
func (r route) attach(what string, h handler) route {
	r.Access, r.h = openapi.Admin, r.s.attachAdmin(what, h)
	return r
}

func (r route) public(h http.HandlerFunc) route {
	r.Access, r.h = openapi.Public, h
	return r
}

// body is the request body's type.
func (r route) body(v any) route {
	r.Request = v
	return r
}

// optional marks the body as one that may be left out.
func (r route) optional() route {
	r.OptionalBody = true
	return r
}

// ok adds a JSON answer of v's type with status.
func (r route) ok(status int, v any) route {
	r.Responses = append(r.Responses, openapi.Response{Status: status, Description: http.StatusText(status), Body: v})
	return r
}

// empty adds an answer without a body.
func (r route) empty(status int, why string) route {
	r.Responses = append(r.Responses, openapi.Response{Status: status, Description: why})
	return r
}

// csv adds a CSV answer (status 200) with its columns and those that may
// follow them.
func (r route) csv(columns, more []string) route {
	r.Responses = append(r.Responses, openapi.Response{Status: 200, Description: "OK", Media: openapi.CSV, Columns: columns, MoreColumns: more})
	return r
}

// sse adds a stream of server-sent events whose data is v's type.
func (r route) sse(v any) route {
	r.Responses = append(r.Responses, openapi.Response{Status: 200, Description: "OK", Media: openapi.SSE, Event: v})
	return r
}

func (r route) q(params ...openapi.Param) route {
	r.Query = append(r.Query, params...)
	return r
}

// errs adds the error statuses the route answers besides the common ones.
func (r route) errs(status ...int) route {
	r.Errors = append(r.Errors, status...)
	return r
}

func (r route) doc(d string) route {
	r.Description = d
	return r
}

// tagged sets the tag of a group of routes.
func tagged(tag string, rs ...route) []route {
	for i := range rs {
		rs[i].Tag = tag
	}
	return rs
}

// routeList is every operation of the API, in the document's order.
func (s *Server) routeList() []route {
	var out []route
	for _, group := range [][]route{
		s.clusterRoutes(), s.eventRoutes(), s.capacityRoutes(), s.statsRoutes(), s.planRoutes(),
		s.usageRoutes(), s.budgetRoutes(), s.tokenRoutes(), s.webhookRoutes(),
		s.projectRoutes(), s.fleetRoutes(), s.attachRoutes(), s.simulationRoutes(), s.healthRoutes(),
	} {
		out = append(out, group...)
	}
	return out
}

// routes registers the handlers of routeList.
func (s *Server) routes() {
	for _, r := range s.routeList() {
		s.mux.Handle(r.Method+" "+r.Path, r.h)
	}
}

// Contract is the API's operations without their handlers: what the
// OpenAPI document describes.
func Contract() []openapi.Op {
	s := &Server{}
	rs := s.routeList()
	out := make([]openapi.Op, len(rs))
	for i, r := range rs {
		out[i] = r.Op
	}
	return out
}
