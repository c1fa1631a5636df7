package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Permission is one verb on one resource that the driver uses.
// Permissions lists them all: the role the docs give (ClusterRole), the
// check at attach (CheckAccess) and what the driver reports when a call
// is refused all come from that one list.
type Permission struct {
	Verb     string
	Resource string // "pods", or with a subresource: "pods/status"
	// Group is the resource's API group ("" for the core group).
	Group string
	Need  Need
	// Without says what goes wrong while it is missing, and the remedy.
	Without string
}

// Need says what the driver does without a permission.
type Need int

const (
	// Essential: without it sparecap cannot keep the reclaim contract (or
	// adopt nodes at all); attaching a cluster that lacks one is refused.
	Essential Need = iota
	// Courtesy: every pod still gets its notice without it; the tenant
	// loses what Permission.Without says. Attaching warns.
	Courtesy
	// Register: needed only with the register machine provider, which
	// stands in for the kubelet (essential then, unused otherwise).
	Register
)

func (p Permission) String() string {
	if p.Group != "" {
		return p.Verb + " " + p.Resource + "." + p.Group
	}
	return p.Verb + " " + p.Resource
}

// The permissions the driver's calls need, by name.
var (
	permGetNodes = Permission{"get", "nodes", "", Essential,
		"sparecap cannot adopt nodes or mark draining ones: grant get on nodes"}
	permListNodes = Permission{"list", "nodes", "", Essential,
		"sparecap cannot watch nodes, so it cannot adopt them or tell lost ones: grant list on nodes"}
	permWatchNodes = Permission{"watch", "nodes", "", Essential,
		"sparecap cannot watch nodes, so it cannot adopt them or tell lost ones: grant watch on nodes"}
	permPatchNodes = Permission{"patch", "nodes", "", Essential,
		"sparecap cannot adopt nodes (labels, taints) or cordon, taint and annotate draining ones: grant patch on nodes"}
	permDeleteNodes = Permission{"delete", "nodes", "", Essential,
		"removed nodes' Node objects stay in the cluster: grant delete on nodes"}
	permCreateNodes = Permission{"create", "nodes", "", Register,
		"the register provider cannot create Nodes: grant create on nodes"}
	permUpdateStatus = Permission{"update", "nodes/status", "", Register,
		"the register provider cannot report its Nodes Ready: grant update on nodes/status"}
	permListPods = Permission{"list", "pods", "", Essential,
		"sparecap cannot see the pods on a node (no notice, no early release): grant list on pods"}
	permWatchPods = Permission{"watch", "pods", "", Essential,
		"sparecap cannot see the pods on a node (no notice, no early release): grant watch on pods"}
	permDeletePods = Permission{"delete", "pods", "", Essential,
		"pods whose eviction is refused get no SIGTERM, and none is force-deleted at the deadline: grant delete on pods"}
	permEvict = Permission{"create", "pods/eviction", "", Courtesy,
		"each notice takes two calls instead of one, so a mass reclaim's notices go out about half as fast: grant create on pods/eviction"}
	permPodStatus = Permission{"patch", "pods/status", "", Courtesy,
		"pods a PodDisruptionBudget protects get SIGTERM but Jobs count their reclaim as a failure: grant patch on pods/status"}
	permPatchPods = Permission{"patch", "pods", "", Courtesy,
		"pods that read their deadline from their annotations do not find it there (they still get SIGTERM with grace to the deadline): grant patch on pods"}
	permEvents = Permission{"create", "events", "", Courtesy,
		"no Kubernetes Events: tenants see a reclaim in SIGTERM, the node's deadline annotation and sparecap's API, not in kubectl get events: grant create on events"}
	permListBudgets = Permission{"list", "poddisruptionbudgets", "policy", Courtesy,
		"reclaims do not see PodDisruptionBudgets: a node whose pods' budget allows no disruption may go before another: grant list on poddisruptionbudgets.policy"}
	permWatchBudgets = Permission{"watch", "poddisruptionbudgets", "policy", Courtesy,
		"reclaims do not see PodDisruptionBudgets: a node whose pods' budget allows no disruption may go before another: grant watch on poddisruptionbudgets.policy"}
)

// Permissions are every permission the driver uses, in the order the
// documented role lists them.
var Permissions = []Permission{
	permGetNodes, permListNodes, permWatchNodes, permPatchNodes, permDeleteNodes, permCreateNodes,
	permUpdateStatus,
	permListPods, permWatchPods, permDeletePods,
	permEvict,
	permPodStatus,
	permPatchPods,
	permEvents,
	permListBudgets, permWatchBudgets,
}

// effect is what missing p costs, given everything missing: without both
// evictions and the status patch no pod gets the condition.
func effect(p Permission, missing []Permission) string {
	if (p == permEvict || p == permPodStatus) && contains(missing, permEvict) && contains(missing, permPodStatus) {
		return "pods get SIGTERM but no DisruptionTarget condition, so Jobs count the reclaim as a failure: grant create on pods/eviction (or patch on pods/status)"
	}
	return p.Without
}

func contains(ps []Permission, p Permission) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// Missing describes missing permissions for the cluster's access record.
func Missing(missing []Permission, detail string) []domain.MissingPermission {
	out := make([]domain.MissingPermission, len(missing))
	for i, p := range missing {
		out[i] = domain.MissingPermission{Permission: p.String(), Essential: p.Need != Courtesy, Effect: effect(p, missing), Detail: detail}
	}
	return out
}

// ClusterRole is the role the docs tell operators to bind sparecap's
// identity to (docs/kubernetes.md): every permission in Permissions, one
// rule per resource.
func ClusterRole() rbacv1.ClusterRole {
	role := rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "sparecap"}}
	at := map[[2]string]int{}
	for _, p := range Permissions {
		key := [2]string{p.Group, p.Resource}
		i, ok := at[key]
		if !ok {
			i = len(role.Rules)
			at[key] = i
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{p.Resource}})
		}
		role.Rules[i].Verbs = append(role.Rules[i].Verbs, p.Verb)
	}
	return role
}

// needed are the permissions CheckAccess asks for.
func needed(register bool) []Permission {
	var out []Permission
	for _, p := range Permissions {
		if p.Need != Register || register {
			out = append(out, p)
		}
	}
	return out
}

// CheckAccess asks the cluster, with one SelfSubjectAccessReview per
// permission, which of those the driver uses its identity may not use
// (cluster-wide), in Permissions' order. register adds the register
// provider's. An error means the cluster could not be asked.
func CheckAccess(ctx context.Context, client kubernetes.Interface, register bool) ([]Permission, error) {
	ps := needed(register)
	allowed := make([]bool, len(ps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range ps {
		g.Go(func() error {
			res, sub, _ := strings.Cut(p.Resource, "/")
			r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(gctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: p.Verb, Group: p.Group, Resource: res, Subresource: sub}}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("ask whether sparecap may %s: %w", p, err)
			}
			allowed[i] = r.Status.Allowed
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var missing []Permission
	for i, p := range ps {
		if !allowed[i] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// Identity is the user the cluster takes the client for (a
// SelfSubjectReview), or "" if it cannot tell.
func Identity(ctx context.Context, client kubernetes.Interface) string {
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	return r.Status.UserInfo.Username
}

// ErrEssentialMissing is wrapped by CheckKubeconfigAccess's error when
// the identity lacks a permission sparecap cannot do without.
var ErrEssentialMissing = errors.New("the kubeconfig's identity lacks permissions sparecap cannot work without")

// CheckKubeconfigAccess checks what a kubeconfig's identity may do in its
// cluster, as an attach does before the kubeconfig is stored: the access
// record to keep, or an error wrapping ErrEssentialMissing that lists the
// essential permissions missing, or one saying the cluster could not be
// asked (within timeout).
func CheckKubeconfigAccess(ctx context.Context, kubeconfig []byte, register bool, timeout time.Duration, now time.Time) (domain.Access, error) {
	rc, err := RESTConfig(kubeconfig)
	if err != nil {
		return domain.Access{}, err
	}
	// One review per permission, at once: client-go's default of 5 QPS
	// would make an attach wait seconds.
	rc.Timeout, rc.QPS, rc.Burst = timeout, 50, 50
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return domain.Access{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	missing, err := CheckAccess(ctx, client, register)
	if err != nil {
		return domain.Access{}, fmt.Errorf("cannot check sparecap's permissions in the cluster: %w", err)
	}
	var essential []string
	for _, p := range missing {
		if p.Need != Courtesy {
			essential = append(essential, p.String())
		}
	}
	if len(essential) > 0 {
		who := Identity(ctx, client)
		if who == "" {
			who = "unknown"
		}
		return domain.Access{}, fmt.Errorf("%w: %s (identity %s); grant them (the ClusterRole in docs/kubernetes.md) and attach again",
			ErrEssentialMissing, strings.Join(essential, ", "), who)
	}
	a, _ := domain.Access{}.Merge(true, Missing(missing, ""), now)
	return a, nil
}

// refusedFor is how long a permission the cluster refused (or a check
// found missing) is not asked for again: a mass reclaim asks once, not
// once per pod, and a permission granted later is found within this.
const refusedFor = time.Minute

// refusals remembers the permissions a cluster refused, and when.
type refusals struct {
	mu sync.Mutex
	at map[Permission]time.Time
}

// may reports whether a call needing p is worth making at now.
func (c *Cluster) may(p Permission) bool {
	c.refused.mu.Lock()
	defer c.refused.mu.Unlock()
	at, ok := c.refused.at[p]
	return !ok || !c.opts.Clock.Now().Before(at.Add(refusedFor))
}

// granted forgets a refusal of p: a call needing it succeeded.
func (c *Cluster) granted(p Permission) {
	c.refused.mu.Lock()
	delete(c.refused.at, p)
	c.refused.mu.Unlock()
}

// refuse remembers that p is missing; it reports whether it was known.
func (c *Cluster) refuse(p Permission) (known bool) {
	c.refused.mu.Lock()
	defer c.refused.mu.Unlock()
	if c.refused.at == nil {
		c.refused.at = map[Permission]time.Time{}
	}
	_, known = c.refused.at[p]
	c.refused.at[p] = c.opts.Clock.Now()
	return known
}

// refusal tells whether err is the cluster refusing a call needing p (its
// RBAC, or an admission policy or webhook) and, the first time, reports
// it through the Access hook and the log. It is false for every other
// error: a timeout or an API that is down says nothing of permissions.
func (c *Cluster) refusal(p Permission, node string, err error) bool {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return false
	}
	if c.refuse(p) {
		return true
	}
	c.opts.Log.Warn("the cluster refused a call sparecap makes; it is reported once and not made again for a minute",
		"cluster", c.id, "node", node, "permission", p.String(), "err", err)
	c.report(driver.AccessReport{ClusterID: c.id, NodeName: node, Missing: Missing([]Permission{p}, err.Error())})
	return true
}

// report tells the Access hook, unless the driver was closed (a
// detach, another kubeconfig): it speaks for the cluster no more.
func (c *Cluster) report(r driver.AccessReport) {
	select {
	case <-c.stop:
		return
	default:
	}
	if f := c.hooks().Access; f != nil {
		f(r)
	}
}

// checkAccess checks the cluster's permissions when the driver starts (a
// server's start, an attach), remembers what is missing so the notice
// does not spend calls on it, and reports the answer.
func (c *Cluster) checkAccess() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	missing, err := CheckAccess(ctx, c.client, c.opts.RegisterNodes)
	if err != nil {
		c.opts.Log.Warn("cannot check sparecap's permissions in a cluster", "cluster", c.id, "err", err)
		return
	}
	for _, p := range missing {
		c.refuse(p)
	}
	if !contains(missing, permListBudgets) && !contains(missing, permWatchBudgets) {
		c.startBudgets()
	}
	if len(missing) > 0 {
		c.opts.Log.Warn("the cluster does not grant sparecap every permission it uses", "cluster", c.id, "missing", fmt.Sprint(missing))
	}
	c.report(driver.AccessReport{ClusterID: c.id, Checked: true, Missing: Missing(missing, "")})
}
