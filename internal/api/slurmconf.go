package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
)

// A SLURM cluster's slurm.conf is attached like a kubeconfig: checked (its
// slurmctld must answer), sealed, stored in the cluster's one attachment
// column, never returned.

// maxSlurmConf bounds an attached slurm.conf.
const maxSlurmConf = 256 << 10

func (s *Server) attachSlurm(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	c, err := s.slurmCluster(ctx, r, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req apiv1.AttachSlurmRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkSlurm(ctx, req.SlurmConf); err != nil {
		s.fail(w, r, err)
		return
	}
	sealed, err := s.Sealer.Seal([]byte(req.SlurmConf), c.ID)
	if err != nil {
		s.fail(w, r, fmt.Errorf("seal slurm.conf: %w", err))
		return
	}
	if err := s.setKubeconfig(ctx, c.ID, sealed, domain.Access{}); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("slurm.conf attached", "cluster", c.ID)
	s.writeFreshCluster(w, r, c.ID)
}

func (s *Server) detachSlurm(w http.ResponseWriter, r *http.Request, p principal) {
	c, err := s.slurmCluster(r.Context(), r, p)
	s.detach(w, r, c, err, "slurm.conf")
}

// slurmCluster is the SLURM cluster the request names.
func (s *Server) slurmCluster(ctx context.Context, r *http.Request, p principal) (domain.Cluster, error) {
	c, err := s.visibleCluster(ctx, r.PathValue("id"), p)
	if err != nil {
		return c, err
	}
	if c.Type != domain.ClusterSlurm {
		return c, invalid("cluster_type", "cluster %s is a %s cluster; a slurm.conf attaches to SLURM clusters only (a Kubernetes cluster's API attaches with PUT /v1/admin/clusters/{id}/kubeconfig)", c.ID, c.Type)
	}
	return c, nil
}

// checkSlurm refuses a slurm.conf that cannot be one, or whose slurmctld
// does not answer (Options.CheckSlurm).
func (s *Server) checkSlurm(ctx context.Context, conf string) error {
	if s.Sealer == nil {
		return errNoSealer()
	}
	switch {
	case conf == "":
		return invalid("slurm_conf", "slurm_conf is required: the text of the slurm.conf that reaches the cluster's slurmctld")
	case len(conf) > maxSlurmConf:
		return invalid("slurm_conf", "slurm_conf is %d bytes; at most %d", len(conf), maxSlurmConf)
	}
	if s.CheckSlurm == nil {
		return nil
	}
	if err := s.CheckSlurm(ctx, []byte(conf)); err != nil {
		return invalid("slurm_conf", "the slurm.conf was not attached: %v", err)
	}
	return nil
}
