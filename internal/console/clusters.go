package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

func (c *Console) clusters(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	list, err := api.ListClusters(r.Context(), client.ListClustersOptions{})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.render(w, http.StatusOK, "clusters", view{Title: "Clusters", Nav: "clusters", Flash: r.URL.Query().Get("flash"), Data: list.Clusters}, s)
}

// offer is what the create and scale pages show for one region and GPU
// type: capacity now and prices.
type offer struct {
	Region, GPUType                      string
	OnDemandGPUs, PreemptibleGPUs, Total int
	OnDemandPrice, PreemptiblePrice      string
}

func (c *Console) offers(ctx context.Context, api *client.Client) ([]offer, error) {
	caps, err := api.Capacity(ctx)
	if err != nil {
		return nil, err
	}
	rates, err := api.Rates(ctx)
	if err != nil {
		return nil, err
	}
	price := map[string]apiv1.Rate{}
	for _, r := range rates.Rates {
		price[r.Region+"/"+r.GPUType] = r
	}
	var out []offer
	for _, cp := range caps.Capacity {
		p := price[cp.Region+"/"+cp.GPUType]
		out = append(out, offer{Region: cp.Region, GPUType: cp.GPUType, OnDemandGPUs: cp.AvailableOnDemand,
			PreemptibleGPUs: cp.AvailablePreemptible, Total: cp.Total, OnDemandPrice: p.OnDemand, PreemptiblePrice: p.Preemptible})
	}
	return out, nil
}

// form carries a create or scale form back to the page with the API's
// verdict next to the field it names.
type form struct {
	Values   map[string]string
	Errors   map[string]string
	Offers   []offer
	Projects []string
	Cluster  *apiv1.Cluster
	// Strategies are the preemptible strategies the scale form offers.
	Strategies []string
}

func (c *Console) newCluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	c.renderNew(w, r, s, api, http.StatusOK, map[string]string{"cluster_type": "KUBERNETES", "billing_type": "ON_DEMAND", "num_gpus": "8", "num_preemptible_gpus": "0"}, nil, "")
}

func (c *Console) renderNew(w http.ResponseWriter, r *http.Request, s *session, api *client.Client, status int, values, errs map[string]string, msg string) {
	offers, err := c.offers(r.Context(), api)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	f := form{Values: values, Errors: errs, Offers: offers}
	if s.admin {
		ps, err := api.ListProjects(r.Context())
		if err != nil {
			c.apiFailure(w, s, err)
			return
		}
		for _, p := range ps.Projects {
			f.Projects = append(f.Projects, p.ProjectID)
		}
	}
	c.render(w, status, "new", view{Title: "Create cluster", Nav: "new", Error: msg, Data: f}, s)
}

// formInt reads an integer field; a bad number is left for the API to
// refuse, so its message is the one users see everywhere.
func formInt(r *http.Request, name string, errs map[string]string) int {
	v := strings.TrimSpace(r.PostFormValue(name))
	n, err := strconv.Atoi(v)
	if err != nil {
		errs[name] = fmt.Sprintf("%s must be a whole number of GPUs", strings.ReplaceAll(name, "_", " "))
	}
	return n
}

func fieldError(err error, errs map[string]string) (string, bool) {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return "", false
	}
	if ae.Field != "" {
		errs[ae.Field] = ae.Message
		return "", true
	}
	return ae.Message, true
}

func (c *Console) createCluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	values := map[string]string{}
	for _, k := range []string{"cluster_name", "region_gpu", "cluster_type", "billing_type", "num_gpus", "num_preemptible_gpus", "project_id", "preemptible", "starts_at"} {
		values[k] = r.PostFormValue(k)
	}
	errs := map[string]string{}
	region, gpu, _ := strings.Cut(values["region_gpu"], "/")
	req := apiv1.CreateClusterRequest{ClusterName: values["cluster_name"], Region: region, GPUType: gpu,
		ClusterType: values["cluster_type"], BillingType: values["billing_type"], ProjectID: values["project_id"],
		NumGPUs: formInt(r, "num_gpus", errs)}
	if values["preemptible"] == "on" {
		req.NumPreemptibleGPUs = formInt(r, "num_preemptible_gpus", errs)
	}
	if v := strings.TrimSpace(values["starts_at"]); v != "" {
		at, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs["starts_at"] = "a time like 2026-12-14T08:00:00Z, or empty to start now"
		}
		req.StartsAt = &at
	}
	if len(errs) > 0 {
		c.renderNew(w, r, s, api, http.StatusBadRequest, values, errs, "")
		return
	}
	cl, err := api.CreateCluster(r.Context(), req)
	if err != nil {
		if msg, ok := fieldError(err, errs); ok {
			if errs["region"] != "" || errs["gpu_type"] != "" {
				errs["region_gpu"] = errs["region"] + errs["gpu_type"]
			}
			c.renderNew(w, r, s, api, statusOf(err), values, errs, msg)
			return
		}
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/clusters/"+url.PathEscape(cl.ClusterID), http.StatusSeeOther)
}

func statusOf(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return http.StatusInternalServerError
}

type clusterPage struct {
	Cluster *apiv1.Cluster
	Events  []apiv1.Event
	Cursor  string
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	cl, err := api.GetCluster(ctx, r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	evs, err := api.ListEvents(ctx, cl.ClusterID, "", 1000)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	events := slices.Clone(evs.Events)
	slices.Reverse(events) // newest first
	c.render(w, http.StatusOK, "cluster", view{Title: cl.ClusterName, Nav: "clusters", Flash: r.URL.Query().Get("flash"),
		Data: clusterPage{Cluster: cl, Events: events, Cursor: evs.NextCursor}}, s)
}

func (c *Console) scalePage(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	cl, err := api.GetCluster(r.Context(), r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.renderScale(w, r, s, api, http.StatusOK, cl, map[string]string{
		"num_gpus": strconv.Itoa(cl.NumGPUs), "num_preemptible_gpus": strconv.Itoa(cl.DesiredPreemptibleGPUs),
		"max_preemptible_gpus": strconv.Itoa(cl.MaxPreemptibleGPUs), "preemptible_gpu_types": strings.Join(cl.PreemptibleGPUTypes, ", "),
		"preemptible_strategy": cl.PreemptibleStrategy, "max_preemptible_per_gpu_hour": cl.MaxPreemptiblePerGPUHour}, nil, "")
}

func (c *Console) renderScale(w http.ResponseWriter, r *http.Request, s *session, api *client.Client, status int, cl *apiv1.Cluster, values, errs map[string]string, msg string) {
	offers, err := c.offers(r.Context(), api)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	var mine []offer
	for _, o := range offers {
		if o.Region == cl.Region && o.GPUType == cl.GPUType {
			mine = append(mine, o)
		}
	}
	c.render(w, status, "scale", view{Title: "Scale " + cl.ClusterName, Nav: "clusters", Error: msg,
		Data: form{Values: values, Errors: errs, Offers: mine, Cluster: cl, Strategies: strategies}}, s)
}

func (c *Console) scale(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	cl, err := api.GetCluster(ctx, r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	values := map[string]string{"num_gpus": r.PostFormValue("num_gpus"), "num_preemptible_gpus": r.PostFormValue("num_preemptible_gpus")}
	errs := map[string]string{}
	std, pre := formInt(r, "num_gpus", errs), formInt(r, "num_preemptible_gpus", errs)
	// The queue's maximum is on the form of KUBERNETES clusters only.
	maxPre := cl.MaxPreemptibleGPUs
	if _, ok := r.PostForm["max_preemptible_gpus"]; ok {
		values["max_preemptible_gpus"] = r.PostFormValue("max_preemptible_gpus")
		maxPre = formInt(r, "max_preemptible_gpus", errs)
	}
	if len(errs) > 0 {
		c.renderScale(w, r, s, api, http.StatusBadRequest, cl, values, errs, "")
		return
	}
	var req apiv1.UpdateClusterRequest
	if std != cl.NumGPUs {
		req.NumGPUs = &std
	}
	if pre != cl.DesiredPreemptibleGPUs {
		req.NumPreemptibleGPUs = &pre
	}
	if maxPre != cl.MaxPreemptibleGPUs {
		req.MaxPreemptibleGPUs = &maxPre
	}
	scalePreemptible(r, cl, values, &req)
	if req == (apiv1.UpdateClusterRequest{}) {
		http.Redirect(w, r, "/console/clusters/"+url.PathEscape(cl.ClusterID), http.StatusSeeOther)
		return
	}
	if _, err := api.UpdateCluster(ctx, cl.ClusterID, req); err != nil {
		if msg, ok := fieldError(err, errs); ok {
			c.renderScale(w, r, s, api, statusOf(err), cl, values, errs, msg)
			return
		}
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/clusters/"+url.PathEscape(cl.ClusterID)+"?flash=Scaling+requested", http.StatusSeeOther)
}

// convertNode converts a node in place (the form's "to": standard or
// preemptible); a refusal shows the API's reason.
func (c *Console) convertNode(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	id, node, to := r.PathValue("id"), r.PathValue("node"), r.PostFormValue("to")
	if to != "standard" && to != "preemptible" {
		c.render(w, http.StatusBadRequest, "error", view{Title: "Bad request", Error: "Convert a node to standard or preemptible."}, s)
		return
	}
	if _, err := api.ConvertNode(r.Context(), id, node, to); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/clusters/"+url.PathEscape(id)+"?flash="+url.QueryEscape("Node converted to "+to), http.StatusSeeOther)
}

func (c *Console) deleteCluster(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if _, err := api.DeleteCluster(r.Context(), r.PathValue("id")); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/?flash=Deletion+requested", http.StatusSeeOther)
}

// strategies are the preemptible strategies, the default first.
var strategies = []string{"in-order", "lowest-price", "capacity-optimized", "price-capacity-optimized"}

// scalePreemptible adds to req the preemptible types, strategy and cap
// the scale form changes (each only when posted and different).
func scalePreemptible(r *http.Request, cl *apiv1.Cluster, values map[string]string, req *apiv1.UpdateClusterRequest) {
	if _, ok := r.PostForm["preemptible_gpu_types"]; ok {
		v := r.PostFormValue("preemptible_gpu_types")
		values["preemptible_gpu_types"] = v
		types := []string{}
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				types = append(types, t)
			}
		}
		if !slices.Equal(types, cl.PreemptibleGPUTypes) {
			req.PreemptibleGPUTypes = &types
		}
	}
	for _, f := range []struct {
		name string
		now  string
		dst  **string
	}{{"preemptible_strategy", cl.PreemptibleStrategy, &req.PreemptibleStrategy}, {"max_preemptible_per_gpu_hour", cl.MaxPreemptiblePerGPUHour, &req.MaxPreemptiblePerGPUHour}} {
		if _, ok := r.PostForm[f.name]; ok {
			v := strings.TrimSpace(r.PostFormValue(f.name))
			values[f.name] = v
			if v != f.now {
				*f.dst = &v
			}
		}
	}
}
