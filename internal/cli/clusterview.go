package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func (s *state) printCluster(cmd *cobra.Command, cl *apiv1.Cluster) error {
	return s.print(cmd.OutOrStdout(), cl, func(tw *tabwriter.Writer) {
		std := standardNodes(cl)
		row(tw, "ID:", cl.ClusterID)
		row(tw, "Name:", cl.ClusterName)
		row(tw, "Project:", cl.ProjectID)
		row(tw, "Region:", cl.Region)
		row(tw, "GPU type:", cl.GPUType)
		row(tw, "Type:", cl.ClusterType+", "+cl.BillingType)
		if cl.Slurm != nil {
			row(tw, "Slurm:", s.kubernetesStatus(apiv1.KubernetesStatus{Attached: cl.Slurm.Attached, AttachedAt: cl.Slurm.AttachedAt}))
		} else {
			row(tw, "Kubernetes:", s.kubernetesStatus(cl.Kubernetes))
		}
		for i, line := range s.accessLines(cl.Access) {
			row(tw, map[bool]string{true: "Permissions:"}[i == 0], line)
		}
		row(tw, "Status:", cl.Status)
		row(tw, "Standard GPUs:", fmt.Sprintf("%d (%d/%d nodes ready)", cl.NumGPUs, std.ready, std.expected))
		pre := fmt.Sprintf("%d allocated / %d desired", cl.AllocatedPreemptibleGPUs, cl.DesiredPreemptibleGPUs)
		if cl.MaxPreemptibleGPUs > 0 {
			pre = fmt.Sprintf("%d allocated / %d target (%d set, %d requested by the queue, at most %d)",
				cl.AllocatedPreemptibleGPUs, cl.TargetPreemptibleGPUs, cl.DesiredPreemptibleGPUs,
				cl.RequestedPreemptibleGPUs, cl.MaxPreemptibleGPUs)
		}
		if u := cl.TargetUnfulfilled; u != nil {
			pre += " (" + u.Reason
			if u.Message != "" {
				pre += ": " + u.Message
			}
			pre += ")"
		}
		row(tw, "Preemptible GPUs:", pre)
		if len(cl.PreemptibleGPUTypes) > 1 || (len(cl.PreemptibleGPUTypes) == 1 && cl.PreemptibleGPUTypes[0] != cl.GPUType) {
			row(tw, "Preemptible types:", strings.Join(cl.PreemptibleGPUTypes, ", ")+" (in order of preference)")
		}
		if by := cl.AllocatedPreemptibleByType; len(by) > 1 || (len(by) == 1 && by[cl.GPUType] == 0) {
			var parts []string
			for _, t := range slices.Sorted(maps.Keys(by)) {
				parts = append(parts, fmt.Sprintf("%s %d", t, by[t]))
			}
			row(tw, "Allocated by type:", strings.Join(parts, ", "))
		}
		if cl.PreemptibleStrategy != "" && cl.PreemptibleStrategy != "in-order" {
			row(tw, "Preemptible strategy:", cl.PreemptibleStrategy)
		}
		if cl.MaxPreemptiblePerGPUHour != "" {
			row(tw, "Preemptible cap:", "$"+cl.MaxPreemptiblePerGPUHour+" per GPU-hour")
		}
		row(tw, "Weight:", cl.Weight)
		row(tw, "Created:", s.timeAndAge(cl.CreatedAt))
		if cl.StartsAt != nil {
			row(tw, "Booked from:", s.deadline(cl.StartsAt))
		}
		if cl.ActiveAt != nil && cl.Status == "Scheduled" {
			row(tw, "Nodes planned from:", s.deadline(cl.ActiveAt)+" (the machines it claims get their notice then)")
		}
		// Flush so the key column's width does not depend on the node rows.
		_ = tw.Flush()
		fmt.Fprintln(tw)
		if len(cl.GPUWorkerNodes) == 0 {
			fmt.Fprintln(tw, "No nodes.")
			return
		}
		s.nodesTable(tw, cl.GPUWorkerNodes)
	})
}

// nodesTable lists nodes, with a LEASE END column when any node's pool
// has a minimum lease and a LAST ERROR column when any node has one.
func (s *state) nodesTable(tw *tabwriter.Writer, nodes []apiv1.Node) {
	withErrors := slices.ContainsFunc(nodes, func(n apiv1.Node) bool { return n.LastError != "" })
	withLeases := slices.ContainsFunc(nodes, func(n apiv1.Node) bool { return n.LeaseEnd != nil })
	withScheduled := slices.ContainsFunc(nodes, func(n apiv1.Node) bool { return n.PreemptAt != nil })
	header := []any{"NAME", "CLASS", "STATUS", "GPUS", "GPU TYPE", "AGE", "DEADLINE"}
	if withScheduled {
		header = append(header, "NOTICE AT")
	}
	if withLeases {
		header = append(header, "LEASE END")
	}
	if withErrors {
		header = append(header, "LAST ERROR")
	}
	row(tw, header...)
	for _, n := range nodes {
		name := n.NodeName
		if name == "" {
			name = n.NodeID
		}
		status := n.Status
		switch {
		case n.Outcome == "lost":
			status += " (lost)"
		case n.CleanupPending:
			status += " (cleanup pending)"
		}
		cols := []any{name, n.ComputeClass, status, n.NumGPUs, orDash(n.GPUType), s.age(n.CreatedAt), s.deadline(n.Deadline)}
		if withScheduled {
			cols = append(cols, s.deadline(n.PreemptAt))
		}
		if withLeases {
			cols = append(cols, s.deadline(n.LeaseEnd))
		}
		if withErrors {
			cols = append(cols, orDash(oneLine(n.LastError)))
		}
		row(tw, cols...)
	}
}

// oneLine keeps an error on its table row: line breaks and tabs become
// spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// kubernetesStatus describes whether the cluster's Kubernetes API (or a
// SLURM cluster's slurm.conf) is attached, for the cluster table.
func (s *state) kubernetesStatus(k apiv1.KubernetesStatus) string {
	switch {
	case !k.Attached:
		return "not attached"
	case k.AttachedAt == nil:
		return "attached"
	}
	return "attached " + s.timeAndAge(*k.AttachedAt)
}

// accessLines say what the cluster's permission check found: all granted,
// or one line per missing permission and what it costs.
func (s *state) accessLines(a *apiv1.Access) []string {
	if a == nil {
		return nil
	}
	checked := ""
	if a.CheckedAt != nil {
		checked = " (checked " + s.timeAndAge(*a.CheckedAt) + ")"
	}
	if len(a.Missing) == 0 {
		return []string{"all granted" + checked}
	}
	lines := []string{fmt.Sprintf("%d missing%s", len(a.Missing), checked)}
	for _, m := range a.Missing {
		kind := "courtesy"
		if m.Essential {
			kind = "essential"
		}
		lines = append(lines, fmt.Sprintf("%s (%s): %s", m.Permission, kind, m.Effect))
	}
	return lines
}

func kubernetesColumn(k apiv1.KubernetesStatus) string {
	if k.Attached {
		return "attached"
	}
	return "-"
}
