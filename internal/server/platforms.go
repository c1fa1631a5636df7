package server

import (
	"context"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/slurm"
)

// platforms builds the Kubernetes and Slurm platforms and the fleet's
// driver over them and the simulation (driver.Router).
func (b *boot) platforms() error {
	o, s := b.o, b.s
	kopts := o.Kube
	kopts.Log, kopts.Clock, kopts.Wall = o.Log, s.Clock, o.Clock
	kopts.AllowKubeconfigPlugins = o.AllowKubeconfigPlugins
	kopts.RegisterNodes = o.MachineProvider == "register"
	// client-go logs through klog (a watch that lost its API server, say):
	// send that to the server's log rather than bare to stderr.
	logClientGo(o.Log.With("component", "client-go"))
	st, sealer := s.Store, b.sealer
	// One column holds a cluster's attachment: a kubeconfig, or a SLURM
	// cluster's slurm.conf. Each platform loads its own (the registrar
	// and the queue manager ask the Kubernetes one of any cluster).
	attachment := func(platform domain.ClusterType) driver.Loader {
		return func(ctx context.Context, id string) ([]byte, error) {
			c, err := st.GetCluster(ctx, id)
			if err != nil {
				return nil, err
			}
			if (c.Type == domain.ClusterSlurm) != (platform == domain.ClusterSlurm) {
				return nil, nil
			}
			sealed, err := st.GetKubeconfig(ctx, id)
			if err != nil || sealed == nil {
				return nil, err
			}
			return sealer.Open(sealed, id)
		}
	}
	s.Kube = kube.NewPlatform(attachment(domain.ClusterKubernetes), kopts)
	dir, err := b.slurmDir()
	if err != nil {
		return err
	}
	b.o.Slurm.Dir = dir // the attach check's copies too
	sopts := b.o.Slurm
	sopts.Log, sopts.Clock = o.Log, s.Clock
	s.Slurm = slurm.NewPlatform(attachment(domain.ClusterSlurm), sopts)
	s.Drivers = driver.NewRouter(func(ctx context.Context, id string) (domain.ClusterType, error) {
		c, err := st.GetCluster(ctx, id)
		if err != nil {
			return "", err
		}
		if c.Type == domain.ClusterSlurm {
			return domain.ClusterSlurm, nil
		}
		return domain.ClusterKubernetes, nil
	}, map[domain.ClusterType]driver.Drivers{domain.ClusterKubernetes: s.Kube, domain.ClusterSlurm: s.Slurm}, s.Sim)
	return nil
}
