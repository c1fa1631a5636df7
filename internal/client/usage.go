package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// UsageQuery selects usage: a period, optionally one project (admin) or
// cluster, and a grouping (node, cluster or compute_class).
type UsageQuery struct {
	ProjectID, ClusterID string
	From, To             time.Time
	GroupBy              string
}

func (q UsageQuery) values() url.Values {
	v := url.Values{"from": {q.From.UTC().Format(time.RFC3339)}, "to": {q.To.UTC().Format(time.RFC3339)}}
	for k, s := range map[string]string{"project_id": q.ProjectID, "cluster_id": q.ClusterID, "group_by": q.GroupBy} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Usage returns priced usage for a period.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (*apiv1.Usage, error) {
	return call[apiv1.Usage](ctx, c, http.MethodGet, "/v1/usage", q.values(), nil)
}

// UsageCSV writes the usage of a period as CSV to w.
func (c *Client) UsageCSV(ctx context.Context, q UsageQuery, w io.Writer) error {
	return c.csv(ctx, "/v1/usage", q.values(), w)
}

// Invoice returns a project's invoice for a month (YYYY-MM).
func (c *Client) Invoice(ctx context.Context, projectID, month string) (*apiv1.Invoice, error) {
	return call[apiv1.Invoice](ctx, c, http.MethodGet, "/v1/invoices", invoiceQuery(projectID, month), nil)
}

// InvoiceCSV writes a project's invoice for a month as CSV to w.
func (c *Client) InvoiceCSV(ctx context.Context, projectID, month string, w io.Writer) error {
	return c.csv(ctx, "/v1/invoices", invoiceQuery(projectID, month), w)
}

func invoiceQuery(projectID, month string) url.Values {
	v := url.Values{"month": {month}}
	if projectID != "" {
		v.Set("project_id", projectID)
	}
	return v
}

func (c *Client) csv(ctx context.Context, path string, q url.Values, w io.Writer) error {
	q.Set("format", "csv")
	resp, err := c.send(ctx, http.MethodGet, path, q, nil, "text/csv")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Rates returns what each region and GPU type costs per GPU-hour now.
func (c *Client) Rates(ctx context.Context) (*apiv1.Rates, error) {
	return call[apiv1.Rates](ctx, c, http.MethodGet, "/v1/prices", nil, nil)
}

// PriceBook returns the whole price book (admin).
func (c *Client) PriceBook(ctx context.Context) (*apiv1.PriceBook, error) {
	return call[apiv1.PriceBook](ctx, c, http.MethodGet, "/v1/admin/prices", nil, nil)
}

// CreatePrice adds a price book entry (admin).
func (c *Client) CreatePrice(ctx context.Context, req apiv1.CreatePriceRequest) (*apiv1.PriceEntry, error) {
	return call[apiv1.PriceEntry](ctx, c, http.MethodPost, "/v1/admin/prices", nil, req)
}

// LostWork returns the lost-work ledger of a period, grouped by q.GroupBy
// (reclaim, job, cluster or month).
func (c *Client) LostWork(ctx context.Context, q UsageQuery) (*apiv1.LostWork, error) {
	return call[apiv1.LostWork](ctx, c, http.MethodGet, "/v1/stats/lost-work", q.values(), nil)
}
