package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/domain"
)

// The webhook pages: a project's endpoints with a form to register one,
// and each endpoint with its recent deliveries and its actions (test,
// rotate the secret, enable or disable, delete). A project sees its own;
// an operator picks the project (?project=), as its token has none.

// webhooksPage is what the webhooks page shows.
type webhooksPage struct {
	Project  string // the project shown; "" when an operator has not picked one
	Projects []string
	Query    string // "?project=…" for an operator's links, "" for a project
	Items    []apiv1.WebhookEndpoint
	Clusters []apiv1.Cluster
	Reasons  []domain.EventReason
	Values   map[string]string
	Checked  map[string]bool // event types and clusters ticked in the form
	Errors   map[string]string
}

// webhookPage is what an endpoint's page shows; Secret is a secret just
// made (create, rotate), shown this once.
type webhookPage struct {
	Query      string
	Endpoint   *apiv1.WebhookEndpoint
	Deliveries []apiv1.WebhookDelivery
	Secret     string
}

// webhookScope is the scope of the session's calls: its project, or the
// project an operator picked.
func webhookScope(r *http.Request, s *session) (client.WebhookScope, string, string) {
	if !s.admin {
		return client.WebhookScope{}, s.project, ""
	}
	p := r.FormValue("project")
	if p == "" {
		return client.WebhookScope{}, "", ""
	}
	return client.WebhookScope{ProjectID: p}, p, "?project=" + url.QueryEscape(p)
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	c.renderWebhooks(w, r, s, calls, http.StatusOK, webhooksPage{}, "")
}

func (c *Console) renderWebhooks(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client, status int, p webhooksPage, msg string) {
	ctx := r.Context()
	scope, project, query := webhookScope(r, s)
	p.Project, p.Query, p.Reasons = project, query, domain.EventReasons
	if s.admin {
		ps, err := calls.ListProjects(ctx)
		if err != nil {
			c.apiFailure(w, s, err)
			return
		}
		for _, x := range ps.Projects {
			p.Projects = append(p.Projects, x.ProjectID)
		}
	}
	if project != "" {
		list, err := calls.ListWebhooks(ctx, scope)
		if err != nil {
			c.apiFailure(w, s, err)
			return
		}
		cls, err := calls.ListClusters(ctx, client.ListClustersOptions{ProjectID: scope.ProjectID})
		if err != nil {
			c.apiFailure(w, s, err)
			return
		}
		p.Items, p.Clusters = list.Endpoints, cls.Clusters
	}
	if p.Values == nil {
		p.Values = map[string]string{"name": "", "url": "", "enabled": "on"}
	}
	c.render(w, status, "webhooks", view{Title: "Webhooks", Nav: "webhooks", Data: p, Error: msg, Flash: r.URL.Query().Get("flash")}, s)
}

func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	scope, _, query := webhookScope(r, s)
	values := map[string]string{"name": r.PostFormValue("name"), "url": r.PostFormValue("url"), "enabled": r.PostFormValue("enabled")}
	checked := map[string]bool{}
	req := apiv1.CreateWebhookRequest{Name: values["name"], URL: values["url"]}
	for _, t := range r.PostForm["event_types"] {
		req.EventTypes, checked["type:"+t] = append(req.EventTypes, t), true
	}
	for _, id := range r.PostForm["cluster_ids"] {
		req.ClusterIDs, checked["cluster:"+id] = append(req.ClusterIDs, id), true
	}
	enabled := values["enabled"] == "on"
	req.Enabled = &enabled
	ep, err := calls.CreateWebhook(r.Context(), scope, req)
	if err == nil {
		c.renderWebhook(w, r, s, calls, http.StatusCreated, ep.EndpointID, query, ep.Secret)
		return
	}
	errs := map[string]string{}
	msg, ok := fieldError(err, errs)
	if !ok {
		c.apiFailure(w, s, err)
		return
	}
	c.renderWebhooks(w, r, s, calls, statusOf(err), webhooksPage{Values: values, Checked: checked, Errors: errs}, msg)
}

func (c *Console) webhook(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	_, _, query := webhookScope(r, s)
	c.renderWebhook(w, r, s, calls, http.StatusOK, r.PathValue("id"), query, "")
}

func (c *Console) renderWebhook(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client, status int, id, query, secret string) {
	ctx := r.Context()
	scope, _, _ := webhookScope(r, s)
	ep, err := calls.GetWebhook(ctx, scope, id)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	ds, err := calls.WebhookDeliveries(ctx, scope, id, client.DeliveriesQuery{Limit: 50})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.render(w, status, "webhook", view{Title: "Webhook " + ep.Name, Nav: "webhooks", Flash: r.URL.Query().Get("flash"),
		Data: webhookPage{Query: query, Endpoint: ep, Deliveries: ds.Deliveries, Secret: secret}}, s)
}

// webhookAction runs one of an endpoint's actions, then shows the endpoint
// with flash, or the error.
func (c *Console) webhookAction(w http.ResponseWriter, r *http.Request, s *session, calls *client.Client) {
	ctx := r.Context()
	scope, _, query := webhookScope(r, s)
	id := r.PathValue("id")
	var err error
	var flash string
	switch r.PathValue("action") {
	case "test":
		var d *apiv1.WebhookDelivery
		if d, err = calls.TestWebhook(ctx, scope, id); err == nil {
			flash = "Test " + d.WebhookID + " sent; reload to see how it went"
		}
	case "enable", "disable":
		on := r.PathValue("action") == "enable"
		if _, err = calls.UpdateWebhook(ctx, scope, id, apiv1.UpdateWebhookRequest{Enabled: &on}); err == nil {
			flash = "Deliveries " + map[bool]string{true: "enabled", false: "disabled"}[on]
		}
	case "rotate":
		var ep *apiv1.WebhookEndpoint
		if ep, err = calls.RotateWebhookSecret(ctx, scope, id, apiv1.RotateWebhookSecretRequest{}); err == nil {
			c.renderWebhook(w, r, s, calls, http.StatusOK, id, query, ep.Secret)
			return
		}
	case "delete":
		var ep *apiv1.WebhookEndpoint
		if ep, err = calls.DeleteWebhook(ctx, scope, id); err == nil {
			http.Redirect(w, r, "/console/webhooks"+query+sep(query)+"flash="+url.QueryEscape("Webhook endpoint "+ep.Name+" deleted"), http.StatusSeeOther)
			return
		}
	default:
		err = &client.APIError{Status: http.StatusNotFound, Code: "not_found", Message: "no such action"}
	}
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/webhooks/"+url.PathEscape(id)+query+sep(query)+"flash="+url.QueryEscape(flash), http.StatusSeeOther)
}

// sep is the separator before another query parameter.
func sep(query string) string {
	if query == "" {
		return "?"
	}
	return "&"
}

// latency shows a delivery's last latency.
func latency(d apiv1.WebhookDelivery) string {
	if d.Attempts == 0 {
		return "-"
	}
	return strconv.FormatFloat(d.LatencyMS, 'f', 0, 64) + " ms"
}
