package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/termsafe"
)

const defaultWaitTimeout = 15 * time.Minute

func newClustersCmd(s *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "clusters",
		Aliases: []string{"cluster"},
		Short:   "Create, scale, inspect and delete clusters",
		Long: `A cluster has standard nodes (num_gpus, provisioned before the create or
update call returns, never preempted) and a target of preemptible GPUs
(num_preemptible_gpus, at half price, filled as spare capacity appears and
reclaimed with a 5-minute drain). GPU counts are multiples of 8.`,
		Example: `  sparecap clusters list
  sparecap clusters get <cluster-id>
  sparecap clusters attach <cluster-id> --kubeconfig cluster.kubeconfig`,
	}
	cmd.AddCommand(
		newClustersCreateCmd(s),
		newClustersUpdateCmd(s),
		newClustersGetCmd(s),
		newClustersListCmd(s),
		newClustersDeleteCmd(s),
		newClustersAttachCmd(s),
		newClustersDetachCmd(s),
		newClustersSetWeightCmd(s),
		newClustersConvertCmd(s),
	)
	return cmd
}

func newClustersCreateCmd(s *state) *cobra.Command {
	var (
		req                      apiv1.CreateClusterRequest
		kubeconfig, startsAtFlag string
		wait                     bool
		timeout                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a cluster",
		Long: `Create a cluster. Its standard nodes (--num-gpus) are provisioned before the
command returns; preemptible nodes (--num-preemptible-gpus) are added
asynchronously as spare capacity appears, and the target is kept until
changed even when it cannot be met yet.

With --wait the command polls until the cluster is Ready and prints progress
on stderr. --project-id is needed with an admin token; a project token
implies its project.

With the admin token, --kubeconfig attaches the cluster's Kubernetes API at
creation, as "clusters attach" does; a kubeconfig the server refuses creates
nothing.

With --starts-at the cluster's standard capacity is booked ahead: accepted
only if its pool can hold it then, it is Scheduled until its nodes are
planned (a drain window and the pool's provisioning time before the start),
Ready at its start and billed from it. The preemptible nodes on the machines
it will take are told now (their preempt_at).`,
		Example: `  sparecap clusters create --name my-cluster --region us-central-2 \
    --gpu-type RTX_6000_PCI --cluster-type KUBERNETES --num-gpus 8 \
    --billing-type ON_DEMAND --num-preemptible-gpus 8 --project-id my-project --wait
  sparecap clusters create --name prod --region us-central-2 --gpu-type RTX_6000_PCI \
    --num-gpus 8 --project-id my-project --kubeconfig prod.kubeconfig
  sparecap clusters create --name monday --region us-central-2 --gpu-type RTX_6000_PCI \
    --num-gpus 64 --project-id my-project --starts-at 2026-12-14T08:00:00Z
  sparecap clusters create --name spread --region us-central-2 --gpu-type H100_SXM \
    --num-gpus 8 --num-preemptible-gpus 32 --preemptible-gpu-types H100_SXM,H200 \
    --preemptible-strategy lowest-price --max-preemptible-per-gpu-hour 1.60`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			if cmd.Flags().Changed("kubeconfig") {
				text, err := readKubeconfig(cmd, kubeconfig)
				if err != nil {
					return err
				}
				req.Kubeconfig = string(text)
			}
			at, err := s.startsAt(cmd, c, startsAtFlag)
			if err != nil {
				return err
			}
			req.StartsAt = at
			cl, err := c.CreateCluster(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("create cluster: %w", err)
			}
			if wait {
				cl, err = s.waitCluster(cmd, c, cl, timeout, "Ready", clusterReady)
				if err != nil {
					return err
				}
			}
			return s.printCluster(cmd, cl)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&req.ClusterName, "name", "", "cluster name (required)")
	f.StringVar(&req.Region, "region", "", "region, for example us-central-2 (required)")
	f.StringVar(&req.GPUType, "gpu-type", "", "GPU type, for example H100 (required)")
	f.StringVar(&req.ClusterType, "cluster-type", "KUBERNETES", "cluster type: KUBERNETES or SLURM (fixed at creation)")
	f.IntVar(&req.NumGPUs, "num-gpus", 0, "standard GPUs, a multiple of 8, at least 8 (required)")
	f.StringVar(&req.BillingType, "billing-type", "ON_DEMAND", "billing of standard nodes: ON_DEMAND or RESERVED")
	f.IntVar(&req.NumPreemptibleGPUs, "num-preemptible-gpus", 0, "target of preemptible GPUs, a multiple of 8")
	f.StringSliceVar(&req.PreemptibleGPUTypes, "preemptible-gpu-types", nil, "GPU types of the region the preemptible target may be of, in order of preference (comma-separated; default: --gpu-type)")
	f.IntVar(&req.MaxPreemptibleGPUs, "max-preemptible-gpus", 0, "let the cluster's queue raise the preemptible target up to this many GPUs with ProvisioningRequests (KUBERNETES; 0: off)")
	f.StringVar(&req.PreemptibleStrategy, "preemptible-strategy", "", strategyHelp+" (default in-order)")
	f.StringVar(&req.MaxPreemptiblePerGPUHour, "max-preemptible-per-gpu-hour", "", capHelp+" (default: no cap)")
	f.StringVar(&req.ProjectID, "project-id", "", "project to create the cluster in (needed with an admin token)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file of the cluster's Kubernetes API to attach (admin token; - reads stdin)")
	f.StringVar(&startsAtFlag, "starts-at", "", "book the standard capacity ahead: the cluster starts then (RFC 3339, or a duration from now such as 2h), Scheduled until then")
	f.BoolVar(&wait, "wait", false, "wait until the cluster is Ready")
	f.DurationVar(&timeout, "timeout", defaultWaitTimeout, "how long --wait waits")
	for _, name := range []string{"name", "region", "gpu-type", "num-gpus"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

func newClustersUpdateCmd(s *state) *cobra.Command {
	var (
		numGPUs, numPreemptible, maxPreemptible int
		startsAtFlag                            string
		wait                                    bool
		timeout                                 time.Duration
		types                                   []string
		strategy, maxPrice                      string
	)
	cmd := &cobra.Command{
		Use:   "update <cluster-id>",
		Short: "Scale a cluster's standard GPUs or preemptible target",
		Long: `Change a cluster's standard GPUs (--num-gpus), its target of preemptible
GPUs (--num-preemptible-gpus) or how far its queue may raise that target
(--max-preemptible-gpus). Only the flags given are sent; the other values
are kept. Lowering the preemptible target drains the surplus preemptible
nodes (up to 5 minutes each); raising it adds nodes as spare capacity
allows.

With --max-preemptible-gpus above 0, ProvisioningRequests of class
preemptible.sparecap.dev in the cluster (Kueue's, or anyone's) raise the
target to what they ask for, up to that maximum, and it comes back down
when they are gone; --num-preemptible-gpus stays a floor
(docs/queues.md).

--preemptible-gpu-types, --preemptible-strategy and
--max-preemptible-per-gpu-hour change which GPU types the preemptible target
may be of, how they are chosen and the most a type may cost
(docs/concepts.md, "A preemptible target over several GPU types"). Nodes of
a type dropped, or priced above the cap, are drained with the usual notice;
nodes are never reclaimed only to move to a preferred type.

With --wait the command polls until the cluster is Ready and its nodes have
settled (none coming up or draining).`,
		Example: `  sparecap clusters update <cluster-id> --num-preemptible-gpus 16
  sparecap clusters update <cluster-id> --preemptible-gpu-types H100_SXM,H200 --max-preemptible-per-gpu-hour 1.60
  sparecap clusters update <cluster-id> --num-gpus 16 --num-preemptible-gpus 0 --wait
  sparecap clusters update <cluster-id> --num-preemptible-gpus 0 --max-preemptible-gpus 64`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			var req apiv1.UpdateClusterRequest
			if cmd.Flags().Changed("num-gpus") {
				req.NumGPUs = &numGPUs
			}
			if cmd.Flags().Changed("num-preemptible-gpus") {
				req.NumPreemptibleGPUs = &numPreemptible
			}
			if cmd.Flags().Changed("max-preemptible-gpus") {
				req.MaxPreemptibleGPUs = &maxPreemptible
			}
			if cmd.Flags().Changed("preemptible-gpu-types") {
				req.PreemptibleGPUTypes = &types
			}
			if cmd.Flags().Changed("preemptible-strategy") {
				req.PreemptibleStrategy = &strategy
			}
			if cmd.Flags().Changed("max-preemptible-per-gpu-hour") {
				req.MaxPreemptiblePerGPUHour = &maxPrice
			}
			if cmd.Flags().Changed("starts-at") {
				at, err := s.startsAt(cmd, c, startsAtFlag)
				if err != nil {
					return err
				}
				req.StartsAt = at
			}
			if req == (apiv1.UpdateClusterRequest{}) {
				return errors.New("nothing to update: set --num-gpus, --num-preemptible-gpus, --max-preemptible-gpus, --preemptible-gpu-types, --preemptible-strategy, --max-preemptible-per-gpu-hour, or --starts-at to move a booking")
			}
			cl, err := c.UpdateCluster(cmd.Context(), args[0], req)
			if err != nil {
				return fmt.Errorf("update cluster %s: %w", args[0], err)
			}
			if wait {
				cl, err = s.waitCluster(cmd, c, cl, timeout, "Ready with settled nodes", clusterSettled)
				if err != nil {
					return err
				}
			}
			return s.printCluster(cmd, cl)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&numGPUs, "num-gpus", 0, "new number of standard GPUs (a multiple of 8)")
	f.IntVar(&numPreemptible, "num-preemptible-gpus", 0, "new target of preemptible GPUs (a multiple of 8; 0 removes them)")
	f.IntVar(&maxPreemptible, "max-preemptible-gpus", 0, "how far the cluster's queue may raise the target with ProvisioningRequests (a multiple of 8; 0 turns it off)")
	f.StringVar(&startsAtFlag, "starts-at", "", "move a booking (a cluster still Scheduled) to start then (RFC 3339, or a duration from now); alone")
	f.StringSliceVar(&types, "preemptible-gpu-types", nil, "new GPU types of the region the preemptible target may be of, in order of preference (comma-separated; \"\" is --gpu-type alone); nodes of a type dropped are moved gracefully")
	f.StringVar(&strategy, "preemptible-strategy", "", strategyHelp)
	f.StringVar(&maxPrice, "max-preemptible-per-gpu-hour", "", capHelp+" (\"\" removes it)")
	f.BoolVar(&wait, "wait", false, "wait until the cluster is Ready and its nodes have settled")
	f.DurationVar(&timeout, "timeout", defaultWaitTimeout, "how long --wait waits")
	return cmd
}

const (
	strategyHelp = "how the preemptible GPU types are chosen: in-order, lowest-price, capacity-optimized (the pool least likely to reclaim) or price-capacity-optimized"
	capHelp      = "the most a preemptible GPU-hour of a type may cost, in dollars (\"1.60\"): a type priced above it gets no nodes, and billing never charges above it"
)

func newClustersGetCmd(s *state) *cobra.Command {
	return &cobra.Command{
		Use:   "get <cluster-id>",
		Short: "Show a cluster and its nodes",
		Long: `Show a cluster: its status, standard GPUs, preemptible target and what is
allocated now (with the reason when the target is not met), and its nodes.`,
		Example: `  sparecap clusters get <cluster-id>
  sparecap clusters get <cluster-id> -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			cl, err := c.GetCluster(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("get cluster %s: %w", args[0], err)
			}
			return s.printCluster(cmd, cl)
		}),
	}
}

func newClustersListCmd(s *state) *cobra.Command {
	var projectID string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List clusters",
		Long: `List the clusters the token may see: a project token sees its project's,
the admin token sees all (narrow with --project-id).`,
		Example: `  sparecap clusters list
  sparecap clusters list --project-id my-project -o json`,
		Args: cobra.NoArgs,
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			list, err := c.ListClusters(cmd.Context(), client.ListClustersOptions{ProjectID: projectID})
			if err != nil {
				return fmt.Errorf("list clusters: %w", err)
			}
			return s.print(cmd.OutOrStdout(), list, func(tw *tabwriter.Writer) {
				row(tw, "ID", "NAME", "PROJECT", "REGION", "GPU_TYPE", "STATUS", "GPUS", "PREEMPTIBLE", "KUBERNETES", "AGE")
				for _, cl := range list.Clusters {
					row(tw, cl.ClusterID, cl.ClusterName, cl.ProjectID, cl.Region, cl.GPUType, cl.Status, cl.NumGPUs,
						fmt.Sprintf("%d/%d", cl.AllocatedPreemptibleGPUs, cl.TargetPreemptibleGPUs),
						kubernetesColumn(cl.Kubernetes), s.age(cl.CreatedAt))
				}
			})
		}),
	}
	cmd.Flags().StringVar(&projectID, "project-id", "", "only clusters of this project")
	return cmd
}

func newClustersDeleteCmd(s *state) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "delete <cluster-id>",
		Short: "Delete a cluster",
		Long: `Delete a cluster. Its nodes are drained (preemptible nodes get the usual
notice) and released; the cluster reports status Deleting until it is gone.
With --wait the command polls until the cluster no longer exists.`,
		Example: `  sparecap clusters delete <cluster-id> --wait`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			id := args[0]
			cl, err := c.DeleteCluster(cmd.Context(), id)
			if err != nil {
				return fmt.Errorf("delete cluster %s: %w", id, err)
			}
			if s.output != outTable {
				if err := s.print(cmd.OutOrStdout(), cl, nil); err != nil {
					return err
				}
			}
			if wait {
				if err := s.waitGone(cmd, c, cl, timeout); err != nil {
					return err
				}
			}
			if s.output == outTable {
				verb := "is being deleted"
				if wait {
					verb = "deleted"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "cluster %s %s\n", termsafe.Escape(id), verb)
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the cluster is gone")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultWaitTimeout, "how long --wait waits")
	return cmd
}

func newClustersAttachCmd(s *state) *cobra.Command {
	var kubeconfig, slurmConf string
	cmd := &cobra.Command{
		Use:   "attach <cluster-id> (--kubeconfig FILE | --slurm-conf FILE)",
		Short: "Attach a cluster's Kubernetes API or Slurm (admin)",
		Long: `Attach a cluster's Kubernetes API or, for a SLURM cluster, its Slurm.

--kubeconfig: a kubeconfig whose current context reaches the cluster's API
server, with its certificates and token embedded rather than named as files
("kubectl config view --minify --flatten --raw" writes one). The server
checks that it parses and names a server and asks the cluster which of the
permissions sparecap uses it grants.

--slurm-conf: the slurm.conf through which the Slurm client commands on
sparecap's host reach the tenant's slurmctld, with its authentication (its
AuthInfo names the munge socket that holds the tenant's key; see
docs/slurm.md). The server checks that slurmctld answers.

Either is stored sealed and never shown again, by any command or API call.
Attaching again replaces it. Needs the admin token. - reads the file from
stdin.`,
		Example: `  kubectl config view --minify --flatten --raw > prod.kubeconfig
  sparecap clusters attach <cluster-id> --kubeconfig prod.kubeconfig
  sparecap clusters attach <slurm-cluster-id> --slurm-conf /etc/sparecap/tenant-a/slurm.conf`,
		Args: cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if slurmConf != "" {
				text, err := readAttachment(cmd, "--slurm-conf", "slurm.conf", slurmConf)
				if err != nil {
					return err
				}
				cl, err := c.AttachSlurm(cmd.Context(), args[0], text)
				if err != nil {
					return fmt.Errorf("attach slurm.conf to cluster %s: %w", args[0], err)
				}
				return s.printCluster(cmd, cl)
			}
			text, err := readKubeconfig(cmd, kubeconfig)
			if err != nil {
				return err
			}
			cl, err := c.AttachKubeconfig(cmd.Context(), args[0], text)
			if err != nil {
				return fmt.Errorf("attach kubeconfig to cluster %s: %w", args[0], err)
			}
			return s.printCluster(cmd, cl)
		}),
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file of a Kubernetes cluster (- reads stdin)")
	cmd.Flags().StringVar(&slurmConf, "slurm-conf", "", "slurm.conf of a SLURM cluster (- reads stdin)")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "slurm-conf")
	cmd.MarkFlagsOneRequired("kubeconfig", "slurm-conf")
	return cmd
}

func newClustersDetachCmd(s *state) *cobra.Command {
	return &cobra.Command{
		Use:   "detach <cluster-id>",
		Short: "Detach a cluster's Kubernetes API or Slurm (admin)",
		Long: `Detach a cluster's Kubernetes API (its kubeconfig) or, for a SLURM cluster,
its slurm.conf: the stored file is deleted. Needs the admin token. Detaching
a cluster with none attached changes nothing.`,
		Example: `  sparecap clusters detach <cluster-id>`,
		Args:    cobra.ExactArgs(1),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			cl, err := c.GetCluster(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("detach cluster %s: %w", args[0], err)
			}
			if cl.ClusterType == "SLURM" {
				if cl, err = c.DetachSlurm(cmd.Context(), args[0]); err != nil {
					return fmt.Errorf("detach slurm.conf from cluster %s: %w", args[0], err)
				}
				return s.printCluster(cmd, cl)
			}
			if cl, err = c.DetachKubeconfig(cmd.Context(), args[0]); err != nil {
				return fmt.Errorf("detach kubeconfig from cluster %s: %w", args[0], err)
			}
			return s.printCluster(cmd, cl)
		}),
	}
}

func newClustersConvertCmd(s *state) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "convert <cluster-id> <node> --to standard|preemptible",
		Short: "Convert a ready node to the other class in place, without a drain",
		Long: `Convert one ready node of a cluster (by its ID or its name) to standard or
preemptible in place: its work keeps running, nothing is drained. From that
second it is billed in its new class (usage shows one line per class), the
cluster's standard GPUs and preemptible target move by its GPUs, and its
class label (Kubernetes) or feature (Slurm) changes; its name does not.

A standard node is never reclaimed. A node becomes standard only on a
machine that may serve the cluster's standard nodes (not one lent from
another project's reservation), and the cluster keeps at least one
standard node (docs/reclaim.md).`,
		Example: `  sparecap clusters convert <cluster-id> gpu-preemptible-dp-3 --to standard
  sparecap clusters convert <cluster-id> gpu-dp-2 --to preemptible`,
		Args: cobra.ExactArgs(2),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			if to != "standard" && to != "preemptible" {
				return fmt.Errorf("--to must be standard or preemptible; got %q", to)
			}
			cl, err := c.ConvertNode(cmd.Context(), args[0], args[1], to)
			if err != nil {
				return fmt.Errorf("convert node %s of cluster %s: %w", args[1], args[0], err)
			}
			return s.printCluster(cmd, cl)
		}),
	}
	cmd.Flags().StringVar(&to, "to", "", "the class to convert the node to: standard or preemptible (required)")
	return cmd
}

func newClustersSetWeightCmd(s *state) *cobra.Command {
	return &cobra.Command{
		Use:   "set-weight <cluster-id> <weight>",
		Short: "Set a cluster's weight in the sharing of spare capacity (admin)",
		Long: `Set a cluster's weight, an integer from 1 to 1000 (every cluster starts at 1).
Spare capacity is shared by weighted max-min fairness: a cluster that wants
more than its share gets spare GPUs in proportion to its weight, so a cluster
of weight 3 gets three times the preemptible GPUs of a cluster of weight 1
when both want more than there is. The next plan uses the new weight at once:
clusters now above their share give up their youngest preemptible nodes with
the usual drain. Standard nodes are never affected. Needs the admin token.`,
		Example: `  sparecap clusters set-weight <cluster-id> 3
  sparecap clusters set-weight <cluster-id> 1`,
		Args: cobra.ExactArgs(2),
		RunE: s.run(func(cmd *cobra.Command, c *client.Client, args []string) error {
			weight, err := strconv.Atoi(args[1])
			if err != nil || weight < 1 || weight > 1000 {
				return fmt.Errorf("weight must be an integer from 1 to 1000; got %q", args[1])
			}
			cl, err := c.SetClusterWeight(cmd.Context(), args[0], weight)
			if err != nil {
				return fmt.Errorf("set weight of cluster %s: %w", args[0], err)
			}
			return s.printCluster(cmd, cl)
		}),
	}
}

// readKubeconfig reads the kubeconfig file named by --kubeconfig ("-":
// stdin) before anything is sent.
func readKubeconfig(cmd *cobra.Command, path string) ([]byte, error) {
	return readAttachment(cmd, "--kubeconfig", "kubeconfig", path)
}

// readAttachment reads the file a flag names (- reads stdin): a kubeconfig
// or a slurm.conf.
func readAttachment(cmd *cobra.Command, flag, kind, path string) ([]byte, error) {
	var (
		text []byte
		err  error
		what = kind + " file " + path
	)
	switch path {
	case "":
		return nil, fmt.Errorf("%s needs a file name (or - for stdin)", flag)
	case "-":
		text, err = io.ReadAll(cmd.InOrStdin())
		what = kind + " from stdin"
	default:
		text, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	if len(bytes.TrimSpace(text)) == 0 {
		return nil, fmt.Errorf("%s is empty", what)
	}
	return text, nil
}

// startsAt parses --starts-at: an RFC 3339 time, or a duration from the
// server's now (a server run with --speed keeps a clock of its own: asked
// first), nil when empty.
func (s *state) startsAt(cmd *cobra.Command, c *client.Client, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return &t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("--starts-at %q: want a time like 2026-12-14T08:00:00Z or a duration from now like 2h", v)
	}
	if _, ok := c.ServerTime(); !ok {
		_ = c.Healthz(cmd.Context()) // its answer carries the server's time
	}
	now := s.now()
	if t, ok := c.ServerTime(); ok {
		now = t
	}
	t := now.Add(d).UTC().Truncate(time.Second)
	return &t, nil
}
