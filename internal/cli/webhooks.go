package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/termsafe"
)

func newWebhooksCmd(s *state) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:     "webhooks",
		Aliases: []string{"webhook"},
		Short:   "Register endpoints that get signed lifecycle events (notices) by HTTP",
		Long: `Manage webhook endpoints: URLs sparecap POSTs lifecycle events to, for
schedulers that run outside the tenant's Kubernetes or Slurm (a Ray
autoscaler, SkyPilot, a queue's worker pool). Each event is a CloudEvent
(JSON, type dev.sparecap.<Reason>), signed the Standard Webhooks way with
the endpoint's secret; PreemptionNotified carries the node, its deadline and
the pods or jobs on it. Deliveries are retried with backoff for a day.

Endpoints belong to a project: a project token manages its own; an
operator names the project with --project-id. The signing secret
(whsec_…) is shown once, when the endpoint is created or its secret
rotated. See docs/webhooks.md for the events and how to verify them.`,
		Example: `  sparecap webhooks create --name ray --endpoint-url https://ray.example.com/sparecap --event-type PreemptionNotified
  sparecap webhooks list
  sparecap webhooks test wh-3f2a9c1d0b7e --wait
  sparecap webhooks deliveries wh-3f2a9c1d0b7e --state failed
  sparecap webhooks rotate wh-3f2a9c1d0b7e
  sparecap webhooks list --project-id team-ml     # operator`,
	}
	cmd.PersistentFlags().StringVar(&project, "project-id", "", "manage this project's endpoints (operator token needed)")
	scope := func() client.WebhookScope { return client.WebhookScope{ProjectID: project} }

	cmd.AddCommand(
		newWebhooksListCmd(s, scope),
		newWebhooksGetCmd(s, scope),
		newWebhooksCreateCmd(s, scope),
		newWebhooksUpdateCmd(s, scope),
		newWebhooksDeleteCmd(s, scope),
		newWebhooksRotateCmd(s, scope),
		newWebhooksTestCmd(s, scope),
		newWebhooksDeliveriesCmd(s, scope),
	)
	return cmd
}

func newWebhooksListCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List webhook endpoints (never their secrets)",
		Long: `List the project's webhook endpoints, oldest first: what each asks for and
how its deliveries stand (pending, delivered, failed, among those kept).`,
		Example: `  sparecap webhooks list
  sparecap webhooks list --project-id team-ml -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListWebhooks(cmd.Context(), scope())
			if err != nil {
				return fmt.Errorf("list webhook endpoints: %w", err)
			}
			return s.print(cmd.OutOrStdout(), list, func(tw *tabwriter.Writer) {
				row(tw, "ID", "NAME", "URL", "EVENTS", "CLUSTERS", "ENABLED", "PENDING", "DELIVERED", "FAILED")
				for _, e := range list.Endpoints {
					row(tw, e.EndpointID, e.Name, e.URL, orAll(e.EventTypes), orAll(e.ClusterIDs), e.Enabled,
						e.Deliveries.Pending, e.Deliveries.Delivered, e.Deliveries.Failed)
				}
			})
		}),
	}
	return list
}

func newWebhooksGetCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	get := &cobra.Command{
		Use:     "get <endpoint-id>",
		Short:   "Show a webhook endpoint",
		Long:    `Show a webhook endpoint: its URL, what it asks for, its state and its deliveries' counts.`,
		Example: `  sparecap webhooks get wh-3f2a9c1d0b7e`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			e, err := c.GetWebhook(cmd.Context(), scope(), args[0])
			if err != nil {
				return fmt.Errorf("get webhook endpoint %s: %w", args[0], err)
			}
			return s.printEndpoint(cmd, e)
		}),
	}
	return get
}

func newWebhooksCreateCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	var req apiv1.CreateWebhookRequest
	var disabled bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Register a webhook endpoint and print its signing secret",
		Long: `Register a webhook endpoint and print its signing secret, shown only this
once. Without --event-type it gets every lifecycle event of the project's
clusters; without --cluster, those of every cluster. The URL must be http
or https; addresses inside the server's network (loopback, private,
link-local) are refused unless the operator allows them.`,
		Example: `  sparecap webhooks create --name ray --endpoint-url https://ray.example.com/sparecap
  sparecap webhooks create --name notices --endpoint-url https://q.example.com/hook \
    --event-type PreemptionNotified --event-type NodeRemoved --cluster c-756dd00bb98d`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			r := req
			if disabled {
				f := false
				r.Enabled = &f
			}
			e, err := c.CreateWebhook(cmd.Context(), scope(), r)
			if err != nil {
				return fmt.Errorf("create webhook endpoint: %w", err)
			}
			return s.printSecret(cmd, e)
		}),
	}
	create.Flags().StringVar(&req.Name, "name", "", "the endpoint's name, unique in the project (letters, digits, '_', '.', '-')")
	create.Flags().StringVar(&req.URL, "endpoint-url", "", "where deliveries are POSTed (https://…)")
	create.Flags().StringArrayVar(&req.EventTypes, "event-type", nil, "an event to deliver, e.g. PreemptionNotified (repeatable; default: every event)")
	create.Flags().StringArrayVar(&req.ClusterIDs, "cluster", nil, "a cluster whose events to deliver (repeatable; default: every cluster of the project)")
	create.Flags().BoolVar(&disabled, "disabled", false, "create it disabled: nothing is delivered until it is enabled")
	return create
}

func newWebhooksUpdateCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	var ch webhookChange
	update := &cobra.Command{
		Use:   "update <endpoint-id>",
		Short: "Change a webhook endpoint",
		Long: `Change a webhook endpoint: only the flags given are sent. --event-type and
--cluster replace the lists (--all-events and --all-clusters clear them);
--enabled=false stops deliveries (those pending wait until it is enabled
again, for at most a day).`,
		Example: `  sparecap webhooks update wh-3f2a9c1d0b7e --enabled=false
  sparecap webhooks update wh-3f2a9c1d0b7e --event-type PreemptionNotified --event-type NodeAdded
  sparecap webhooks update wh-3f2a9c1d0b7e --endpoint-url https://new.example.com/hook --all-clusters`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			r, err := ch.request(cmd.Flags().Changed)
			if err != nil {
				return err
			}
			e, err := c.UpdateWebhook(cmd.Context(), scope(), args[0], r)
			if err != nil {
				return fmt.Errorf("update webhook endpoint %s: %w", args[0], err)
			}
			return s.printEndpoint(cmd, e)
		}),
	}
	update.Flags().StringVar(&ch.name, "name", "", "a new name")
	update.Flags().StringVar(&ch.url, "endpoint-url", "", "a new URL for deliveries")
	update.Flags().StringArrayVar(&ch.types, "event-type", nil, "the events to deliver (repeatable; replaces the list)")
	update.Flags().BoolVar(&ch.allTypes, "all-events", false, "deliver every event")
	update.Flags().StringArrayVar(&ch.clusters, "cluster", nil, "the clusters whose events to deliver (repeatable; replaces the list)")
	update.Flags().BoolVar(&ch.allClusters, "all-clusters", false, "deliver the events of every cluster of the project")
	update.Flags().StringVar(&ch.enabled, "enabled", "", "true or false")
	return update
}

// webhookChange is the flags of webhooks update.
type webhookChange struct {
	name, url, enabled    string
	types, clusters       []string
	allTypes, allClusters bool
}

// request is the update the flags given (changed) ask for; only those
// are sent.
func (ch *webhookChange) request(changed func(flag string) bool) (apiv1.UpdateWebhookRequest, error) {
	var r apiv1.UpdateWebhookRequest
	if changed("name") {
		r.Name = &ch.name
	}
	if changed("endpoint-url") {
		r.URL = &ch.url
	}
	switch {
	case ch.allTypes && len(ch.types) > 0:
		return r, errors.New("--event-type and --all-events: give one or the other")
	case ch.allTypes:
		r.EventTypes = &[]string{}
	case len(ch.types) > 0:
		r.EventTypes = &ch.types
	}
	switch {
	case ch.allClusters && len(ch.clusters) > 0:
		return r, errors.New("--cluster and --all-clusters: give one or the other")
	case ch.allClusters:
		r.ClusterIDs = &[]string{}
	case len(ch.clusters) > 0:
		r.ClusterIDs = &ch.clusters
	}
	if changed("enabled") {
		b, err := strconv.ParseBool(ch.enabled)
		if err != nil {
			return r, fmt.Errorf("--enabled %q: want true or false", ch.enabled)
		}
		r.Enabled = &b
	}
	return r, nil
}

func newWebhooksDeleteCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	del := &cobra.Command{
		Use:     "delete <endpoint-id>",
		Short:   "Delete a webhook endpoint and its deliveries",
		Long:    `Delete a webhook endpoint. Its pending deliveries are dropped, and its delivery records with it.`,
		Example: `  sparecap webhooks delete wh-3f2a9c1d0b7e`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			e, err := c.DeleteWebhook(cmd.Context(), scope(), args[0])
			if err != nil {
				return fmt.Errorf("delete webhook endpoint %s: %w", args[0], err)
			}
			return s.print(cmd.OutOrStdout(), e, func(tw *tabwriter.Writer) {
				row(tw, "Deleted:", e.EndpointID+" ("+e.Name+")")
			})
		}),
	}
	return del
}

func newWebhooksRotateCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	var previous string
	rotate := &cobra.Command{
		Use:   "rotate <endpoint-id>",
		Short: "Give a webhook endpoint a new signing secret",
		Long: `Give a webhook endpoint a new signing secret and print it (shown only this
once). The previous secret keeps signing next to it (each delivery carries
both signatures) for --previous-expires-in, 24h by default, so receivers
can switch over without losing a delivery; 0s stops it at once (it leaked).`,
		Example: `  sparecap webhooks rotate wh-3f2a9c1d0b7e
  sparecap webhooks rotate wh-3f2a9c1d0b7e --previous-expires-in 0s`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			e, err := c.RotateWebhookSecret(cmd.Context(), scope(), args[0], apiv1.RotateWebhookSecretRequest{PreviousExpiresIn: previous})
			if err != nil {
				return fmt.Errorf("rotate the secret of webhook endpoint %s: %w", args[0], err)
			}
			return s.printSecret(cmd, e)
		}),
	}
	rotate.Flags().StringVar(&previous, "previous-expires-in", "", "how long the previous secret keeps signing, 0s to 24h (default 24h)")
	return rotate
}

func newWebhooksTestCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	var wait bool
	var timeout time.Duration
	test := &cobra.Command{
		Use:   "test <endpoint-id>",
		Short: "Send a test event to a webhook endpoint",
		Long: `Send a test event (type dev.sparecap.Test), signed like every delivery, and
print its delivery. With --wait, wait for the first attempt and report how
it went (its HTTP status, or what failed).`,
		Example: `  sparecap webhooks test wh-3f2a9c1d0b7e --wait`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			d, err := c.TestWebhook(cmd.Context(), scope(), args[0])
			if err != nil {
				return fmt.Errorf("test webhook endpoint %s: %w", args[0], err)
			}
			if wait {
				if d, err = s.firstAttempt(cmd, c, scope(), args[0], d, timeout); err != nil {
					return err
				}
			}
			if err := s.printDeliveries(cmd, []apiv1.WebhookDelivery{*d}, d); err != nil {
				return err
			}
			if wait && d.State != "delivered" {
				// The error quotes the endpoint's answer: it reaches a terminal.
				return fmt.Errorf("the test delivery was not accepted: %s", termsafe.Escape(orDash(d.LastError)))
			}
			return nil
		}),
	}
	test.Flags().BoolVar(&wait, "wait", false, "wait for the first attempt and fail unless it was delivered")
	test.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long --wait waits")
	return test
}

// firstAttempt waits until delivery d to endpoint id was attempted once,
// and returns it as it is then.
func (s *state) firstAttempt(cmd *cobra.Command, c *client.Client, scope client.WebhookScope, id string, d *apiv1.WebhookDelivery, timeout time.Duration) (*apiv1.WebhookDelivery, error) {
	err := s.poll(cmd, timeout, func(first bool) (bool, error) {
		if first {
			return false, nil
		}
		list, err := c.WebhookDeliveries(cmd.Context(), scope, id, client.DeliveriesQuery{Limit: 1000})
		if err != nil {
			return false, err
		}
		for _, x := range list.Deliveries {
			if x.WebhookID == d.WebhookID {
				d = &x
			}
		}
		return d.Attempts > 0, nil
	})
	if errors.Is(err, errTimeout) {
		return nil, fmt.Errorf("test delivery %s: no attempt within %s (is the server leading and the endpoint enabled?)", d.WebhookID, timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("test webhook endpoint %s: %w", id, err)
	}
	return d, nil
}

func newWebhooksDeliveriesCmd(s *state, scope func() client.WebhookScope) *cobra.Command {
	var state string
	var limit int
	deliveries := &cobra.Command{
		Use:   "deliveries <endpoint-id>",
		Short: "List a webhook endpoint's recent deliveries and failures",
		Long: `List a webhook endpoint's deliveries, newest first: each event's delivery
ID (its webhook-id header), type, state (pending, delivered, failed),
attempts, the last attempt's HTTP status, latency and error, and when a
pending one is tried next. Ended deliveries are kept 72 hours, at most
1,000 per endpoint.`,
		Example: `  sparecap webhooks deliveries wh-3f2a9c1d0b7e
  sparecap webhooks deliveries wh-3f2a9c1d0b7e --state failed --limit 10`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			list, err := c.WebhookDeliveries(cmd.Context(), scope(), args[0], client.DeliveriesQuery{State: state, Limit: limit})
			if err != nil {
				return fmt.Errorf("list the deliveries of webhook endpoint %s: %w", args[0], err)
			}
			return s.printDeliveries(cmd, list.Deliveries, list)
		}),
	}
	deliveries.Flags().StringVar(&state, "state", "", "only deliveries in this state: pending, delivered or failed")
	deliveries.Flags().IntVar(&limit, "limit", 0, "at most this many (default 100, at most 1000)")
	return deliveries
}

// orAll shows a filter list: "all" when empty.
func orAll(v []string) string {
	if len(v) == 0 {
		return "all"
	}
	return strings.Join(v, ",")
}

func (s *state) printEndpoint(cmd *cobra.Command, e *apiv1.WebhookEndpoint) error {
	return s.print(cmd.OutOrStdout(), e, func(tw *tabwriter.Writer) {
		row(tw, "ID:", e.EndpointID)
		row(tw, "Name:", e.Name)
		row(tw, "Project:", e.ProjectID)
		row(tw, "URL:", e.URL)
		row(tw, "Events:", orAll(e.EventTypes))
		row(tw, "Clusters:", orAll(e.ClusterIDs))
		row(tw, "Enabled:", e.Enabled)
		if e.PreviousSecretExpiresAt != nil {
			row(tw, "Previous secret:", "signs until "+s.localTime(*e.PreviousSecretExpiresAt))
		}
		row(tw, "Deliveries:", fmt.Sprintf("%d pending, %d delivered, %d failed", e.Deliveries.Pending, e.Deliveries.Delivered, e.Deliveries.Failed))
		row(tw, "Created:", s.localTime(e.CreatedAt))
	})
}

// printSecret shows an endpoint with the secret the server shows only in
// this answer.
func (s *state) printSecret(cmd *cobra.Command, e *apiv1.WebhookEndpoint) error {
	if err := s.print(cmd.OutOrStdout(), e, func(tw *tabwriter.Writer) {
		row(tw, "ID:", e.EndpointID)
		row(tw, "Name:", e.Name)
		row(tw, "URL:", e.URL)
		if e.PreviousSecretExpiresAt != nil {
			row(tw, "Previous secret:", "signs until "+s.localTime(*e.PreviousSecretExpiresAt))
		}
		row(tw, "Secret:", e.Secret)
	}); err != nil {
		return err
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "Note: the signing secret is shown only once; store it where your receiver reads it (it cannot be retrieved later).")
	return nil
}

func (s *state) printDeliveries(cmd *cobra.Command, ds []apiv1.WebhookDelivery, v any) error {
	return s.print(cmd.OutOrStdout(), v, func(tw *tabwriter.Writer) {
		row(tw, "WEBHOOK_ID", "TYPE", "STATE", "ATTEMPTS", "STATUS", "LATENCY", "LAST_ATTEMPT", "NEXT_ATTEMPT", "ERROR")
		for _, d := range ds {
			status, latency := "-", "-"
			if d.LastStatusCode != 0 {
				status = strconv.Itoa(d.LastStatusCode)
			}
			if d.Attempts > 0 {
				latency = strconv.FormatFloat(d.LatencyMS, 'f', 0, 64) + "ms"
			}
			last, next := "-", "-"
			if d.LastAttemptAt != nil {
				last = s.localTime(*d.LastAttemptAt)
			}
			if d.NextAttemptAt != nil {
				next = s.localTime(*d.NextAttemptAt)
			}
			row(tw, d.WebhookID, strings.TrimPrefix(d.Type, "dev.sparecap."), d.State, d.Attempts, status, latency, last, next, orDash(d.LastError))
		}
	})
}
