package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/termsafe"
)

func newNodesCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node"},
		Short:   "Inspect the GPU worker nodes of a cluster",
		Long: `Inspect the GPU worker nodes of a cluster. Standard nodes are named gpu-dp-…,
preemptible ones gpu-preemptible-dp-…; a draining node shows its deadline,
after which it is removed whatever its pods are doing.`,
		Example: `  sparecap nodes list --cluster <cluster-id>`,
	}
	var clusterID string
	list := &cobra.Command{
		Use:   "list",
		Short: "List a cluster's nodes",
		Long: `List a cluster's GPU worker nodes: name, compute class (standard or
preemptible), status, GPUs, age, and for draining nodes the drain deadline
(RFC 3339) and the time left. When a step failed on a node (its machine's
provisioning, a call to the cluster's Kubernetes API) a LAST ERROR column
shows the error until the step succeeds; sparecap keeps retrying.`,
		Example: `  sparecap nodes list --cluster <cluster-id>
  sparecap nodes list --cluster <cluster-id> -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			cl, err := c.GetCluster(cmd.Context(), clusterID)
			if err != nil {
				return fmt.Errorf("get cluster %s: %w", clusterID, err)
			}
			out := struct {
				Nodes []apiv1.Node `json:"gpu_worker_nodes"`
			}{cl.GPUWorkerNodes}
			if out.Nodes == nil {
				out.Nodes = []apiv1.Node{}
			}
			return s.print(cmd.OutOrStdout(), out, func(tw *tabwriter.Writer) {
				s.nodesTable(tw, cl.GPUWorkerNodes)
			})
		}),
	}
	list.Flags().StringVar(&clusterID, "cluster", "", "cluster ID (required)")
	_ = list.MarkFlagRequired("cluster")
	cmd.AddCommand(list)
	return cmd
}

func newEventsCmd(s *state) *cobra.Command {
	var (
		clusterID string
		follow    bool
		limit     int
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show a cluster's node lifecycle events",
		Long: `Show a cluster's node lifecycle events, oldest first: nodes added, preemption
notices with their deadline, drains, removals, and changes in whether the
preemptible target is met. Events are kept 72 hours.

With --follow the command keeps streaming new events until interrupted
(Ctrl-C). With -o json --follow every event is one line of JSON; with
-o yaml --follow every event is its own YAML document.`,
		Example: `  sparecap events --cluster <cluster-id>
  sparecap events --cluster <cluster-id> --follow
  sparecap events --cluster <cluster-id> --follow -o json | jq .reason`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			events, cursor, err := listEvents(ctx, c, clusterID, limit)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if !follow {
				list := apiv1.EventList{Events: events, NextCursor: cursor}
				if list.Events == nil {
					list.Events = []apiv1.Event{}
				}
				if s.output != outTable {
					return s.print(w, list, nil)
				}
				if len(events) == 0 {
					fmt.Fprintln(w, "No events.")
					return nil
				}
			}
			ew := &eventWriter{s: s, w: w, stream: follow}
			for _, e := range events {
				if err := ew.write(e); err != nil {
					return err
				}
			}
			if !follow {
				return nil
			}
			err = c.WatchEvents(ctx, clusterID, cursor, ew.write)
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil // interrupted: the normal way to stop following
			}
			return fmt.Errorf("follow events of %s: %w", clusterID, err)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&clusterID, "cluster", "", "cluster ID (required)")
	f.BoolVarP(&follow, "follow", "f", false, "keep streaming new events until interrupted")
	f.IntVar(&limit, "limit", 0, "list at most this many events before following (0: all kept)")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

// listEvents pages through the kept events from the oldest, up to limit (0:
// all). It returns them with the cursor to follow from.
func listEvents(ctx context.Context, c *client.Client, clusterID string, limit int) ([]apiv1.Event, string, error) {
	var (
		all    []apiv1.Event
		cursor string
	)
	for {
		pageSize := 0
		if limit > 0 {
			pageSize = limit - len(all)
		}
		page, err := c.ListEvents(ctx, clusterID, cursor, pageSize)
		if err != nil {
			return nil, "", fmt.Errorf("list events of %s: %w", clusterID, err)
		}
		all = append(all, page.Events...)
		// next_cursor is always set (it is where to resume), so the end of
		// the kept events shows as an empty page or a cursor that stops
		// moving.
		done := len(page.Events) == 0 || page.NextCursor == "" || page.NextCursor == cursor
		if page.NextCursor != "" {
			cursor = page.NextCursor
		}
		if limit > 0 && len(all) >= limit {
			all = all[:limit]
			if last := all[len(all)-1].Cursor; last != "" {
				cursor = last
			}
			done = true
		}
		if done {
			return all, cursor, nil
		}
	}
}

// eventWriter prints events one at a time, so that streamed events line up
// with listed ones: the table has fixed column widths rather than a
// tabwriter, which would have to see every row first.
type eventWriter struct {
	s         *state
	w         io.Writer
	stream    bool
	wroteHead bool
}

const eventRowFormat = "%-19s  %-18s  %-24s  %s\n"

func (ew *eventWriter) write(e apiv1.Event) error {
	switch ew.s.output {
	case outJSON:
		// One event per line: a stream of JSON values a pipe can read as
		// they come.
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(ew.w, "%s\n", b)
		return err
	case outYAML:
		b, err := yaml.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(ew.w, "---\n%s", b)
		return err
	}
	if !ew.wroteHead {
		ew.wroteHead = true
		fmt.Fprintf(ew.w, eventRowFormat, "TIME", "REASON", "NODE", "MESSAGE [DEADLINE]")
	}
	node := e.NodeName
	if node == "" {
		node = orDash(e.NodeID)
	}
	msg := termsafe.Escape(strings.ReplaceAll(e.Message, "\n", " "))
	if e.Deadline != nil {
		// A server run with --speed runs ahead of the CLI's estimate of
		// its clock between responses: an event is no older than now.
		msg += " [deadline " + ew.s.deadlineFrom(e.Deadline, latest(ew.s.now(), e.Timestamp)) + "]"
	}
	_, err := fmt.Fprintf(ew.w, eventRowFormat, ew.s.localTime(e.Timestamp), termsafe.Escape(string(e.Reason)), termsafe.Escape(node), msg)
	return err
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
