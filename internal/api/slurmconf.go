package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/slurm"
	"github.com/sparecap/sparecap/internal/store"
)

// A SLURM cluster's slurm.conf is attached like a kubeconfig: checked (see
// slurm.Check: what it holds, and its slurmctld must answer), sealed,
// stored in the cluster's one attachment column, never returned. One
// Slurm is one cluster's: no two attached clusters share a ClusterName or
// a slurmctld.

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
	ident, err := slurm.ConfIdentity([]byte(req.SlurmConf))
	if err != nil {
		s.fail(w, r, invalid("slurm_conf", "the slurm.conf was not attached: %v", err))
		return
	}
	sealed, err := s.Sealer.Seal([]byte(req.SlurmConf), c.ID)
	if err != nil {
		s.fail(w, r, fmt.Errorf("seal slurm.conf: %w", err))
		return
	}
	if err := s.setSlurmConf(ctx, c.ID, ident, sealed); err != nil {
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

// setSlurmConf stores the sealed slurm.conf of cluster id, in the same
// transaction as the check that no other attached Slurm cluster is the
// same Slurm (see slurm.Identity): updates are serializable, so two
// attaches of one Slurm at once cannot both pass.
func (s *Server) setSlurmConf(ctx context.Context, id string, ident slurm.Identity, sealed []byte) error {
	return s.attach(ctx, id, func(tx store.Tx, now time.Time) error {
		if err := s.slurmUnique(ctx, tx, id, ident); err != nil {
			return err
		}
		return tx.SetKubeconfig(ctx, id, sealed, now)
	})
}

// slurmUnique refuses, with a conflict naming it, another attached SLURM
// cluster whose slurm.conf has ident's ClusterName or one of its
// slurmctlds. The other clusters' files are opened to compare, and only
// that.
func (s *Server) slurmUnique(ctx context.Context, tx store.Tx, id string, ident slurm.Identity) error {
	clusters, err := tx.ListClusters(ctx, "")
	if err != nil {
		return err
	}
	for _, c := range clusters {
		if c.ID == id || c.Type != domain.ClusterSlurm || c.KubeAttachedAt.IsZero() {
			continue
		}
		sealed, err := tx.GetKubeconfig(ctx, c.ID)
		if err != nil {
			return err
		}
		if sealed == nil {
			continue
		}
		text, err := s.Sealer.Open(sealed, c.ID)
		if err != nil {
			return fmt.Errorf("open the slurm.conf of cluster %s to compare: %w", c.ID, err)
		}
		other, _ := slurm.ConfIdentity(text) // as much as it holds
		if same := ident.Shares(other); same != "" {
			return conflict("the slurm.conf was not attached: cluster %s (project %s) has the same %s, and one Slurm is one cluster's: "+
				"each cluster's reclaims would drain the other's nodes; detach it there first", c.ID, c.ProjectID, same)
		}
	}
	return nil
}
