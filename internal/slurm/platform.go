package slurm

import (
	"context"

	"github.com/sparecap/sparecap/internal/driver"
)

// Platform is the Slurm platform of driver.Router: the drivers of the
// SLURM clusters with a slurm.conf attached.
type Platform = driver.Platform[*Cluster]

// NewPlatform returns the Slurm platform: a cluster's driver is a Cluster
// on the slurmctld of the slurm.conf load returns for it, built on first
// use with opts, and kept until Reload.
func NewPlatform(load driver.Loader, opts Options) *Platform {
	opts.defaults()
	return driver.NewPlatform("Slurm", load, func(ctx context.Context, clusterID string, conf []byte, hooks driver.Hooks) (*Cluster, error) {
		opts := opts
		opts.Hooks = hooks
		return NewCluster(ctx, clusterID, conf, opts)
	}, opts.Log)
}

// Check checks a slurm.conf (ParseConf) and asks the slurmctld it reaches
// for its configuration, with the commands of opts and the copy they get
// (written under opts.Dir, removed before Check returns), and returns an
// error saying why when it refuses the file or slurmctld does not answer:
// what an attach checks before it stores the file.
func Check(ctx context.Context, conf []byte, opts Options) error {
	c, err := newCluster(ctx, "check", conf, opts)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}
