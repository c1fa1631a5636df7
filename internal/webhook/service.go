package webhook

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/store"
)

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultWorkTimeout = time.Second
	DefaultWorkers     = 256
	DefaultPerEndpoint = 4
	DefaultPoll        = time.Second
	// DefaultRetention is how long a delivery that ended is kept, and
	// DefaultKeep how many of an endpoint's ended deliveries at most.
	DefaultRetention = 72 * time.Hour
	DefaultKeep      = 1000
	// DefaultMaxPending is how many deliveries an endpoint may have
	// pending: hours of a busy fleet's events.
	DefaultMaxPending = 10000
	// countEvery is how often the dispatcher counts each endpoint's
	// pending deliveries again (between counts it adds what it wrote).
	countEvery = 10 * time.Second
	// pruneEvery is how often ended deliveries are pruned and those past
	// their window failed.
	pruneEvery = 10 * time.Minute
	// dispatchBatch is how many events one dispatch reads.
	dispatchBatch = 500
	// checkpointEvery bounds how long the cursor of events nobody asked
	// for stays unwritten (see dispatch).
	checkpointEvery = 10 * time.Second
)

// Config is what a Service works with. Zero values take the defaults.
type Config struct {
	// Store is the leader's (fenced) store.
	Store store.Store
	// Driver lists the work on a node for a drain notice's message.
	Driver driver.ClusterDriver
	// Sealer opens the endpoints' signing secrets.
	Sealer *secret.Sealer
	// Policy decides which addresses deliveries may reach.
	Policy Policy
	// Clock times attempts, retries and retention: wall time, as
	// receivers check a delivery's timestamp against their own clock
	// (default clock.Real, whatever speed the server's clock runs at).
	Clock clock.Clock
	// Timer paces the loops' polls and times an attempt's latency: wall
	// time too (default clock.Real), apart from Clock so that a test can
	// set the attempts' times by hand while the loops keep polling.
	Timer clock.Clock
	// Random jitters the retries.
	Random *random.Source
	// Changed, if set, returns a channel closed at the next commit that
	// adds lifecycle events (controller.Changed): the dispatcher wakes on
	// it rather than waiting for its next poll.
	Changed func() <-chan struct{}
	Log     *slog.Logger
	// Timeout bounds one attempt, connection included; WorkTimeout the
	// listing of a node's work for a drain notice's message.
	Timeout, WorkTimeout time.Duration
	// Workers bounds the attempts in flight in all, PerEndpoint those to
	// one endpoint (an endpoint that is failing gets one at a time, and
	// failing endpoints together at most half of Workers).
	Workers, PerEndpoint int
	// Poll is how often the store is read for events and due deliveries
	// when nothing woke the service sooner.
	Poll time.Duration
	// Retention and Keep bound the ended deliveries kept.
	Retention time.Duration
	Keep      int
	// MaxPending bounds the deliveries an endpoint has pending: the
	// events beyond are recorded as failed at once (not sent), so an
	// endpoint that stopped answering costs the store a bounded backlog.
	MaxPending int
}

// Service dispatches lifecycle events to webhook endpoints and delivers
// them. Only the leader runs one (Run, for the length of a term):
// everything it knows that matters is in the store, so the next leader
// carries on where it stopped.
type Service struct {
	cfg    Config
	client *http.Client
	kick   chan struct{}

	// The dispatcher's state (its goroutine only): where it reads, what
	// the store holds, when that was written, and each cluster's project
	// and type.
	cursor, stored int64
	loaded         bool
	wroteAt        time.Time
	clusters       map[string]clusterInfo
	// backlog is each endpoint's pending deliveries (dispatcher and
	// sender).
	backlog backlogs

	// The sender's state.
	mu       sync.Mutex
	inflight map[deliveryKey]bool
	perEP    map[string]int
	total    int
	failing  int // attempts in flight to failing endpoints
	health   map[string]*health
	freed    chan struct{}
	// recorded holds the deliveries whose outcome was written since the
	// current pass began its read of due ones: that read may still have
	// seen them pending.
	recorded map[deliveryKey]bool
}

type deliveryKey struct{ endpoint, message string }

// health is what the sender knows of an endpoint this term: how many
// attempts in a row failed, and until when it is left alone.
type health struct {
	failures int
	holdTill time.Time
}

// New returns a Service; Run starts it.
func New(cfg Config) *Service {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Timer == nil {
		cfg.Timer = clock.Real{}
	}
	if cfg.Random == nil {
		cfg.Random = random.FromEntropy()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.WorkTimeout = cmp.Or(cfg.WorkTimeout, DefaultWorkTimeout)
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.PerEndpoint = cmp.Or(cfg.PerEndpoint, DefaultPerEndpoint)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	cfg.Keep = cmp.Or(cfg.Keep, DefaultKeep)
	cfg.MaxPending = cmp.Or(cfg.MaxPending, DefaultMaxPending)
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, Control: cfg.Policy.Control}
	transport := &http.Transport{
		// No proxy from the environment: the address dialled must be the
		// endpoint's, for the policy to mean anything.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxResponseHeaderBytes: maxAnswerHeaders,
		MaxIdleConns:           cfg.Workers,
		MaxIdleConnsPerHost:    cfg.PerEndpoint,
		IdleConnTimeout:        90 * time.Second,
	}
	return &Service{
		cfg: cfg,
		client: &http.Client{Transport: transport,
			// A redirect is an answer, and not a 2xx: it is not followed
			// (it could lead anywhere, the policy's ranges included).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		kick: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		clusters: map[string]clusterInfo{},
		inflight: map[deliveryKey]bool{}, perEP: map[string]int{}, health: map[string]*health{},
	}
}

// Kick makes the sender look for due deliveries now (a test message was
// just made).
func (s *Service) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run dispatches and delivers until ctx ends; attempts in flight then are
// abandoned without a record, so the next leader makes them again (a
// receiver may get a delivery twice: it de-duplicates by its ID).
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.dispatchLoop(ctx) })
	wg.Go(func() { s.pruneLoop(ctx) })
	s.sendLoop(ctx)
	wg.Wait()
}

// pruneLoop fails the deliveries past their window and prunes the ended
// ones, at start and every pruneEvery.
func (s *Service) pruneLoop(ctx context.Context) {
	for {
		if err := s.prune(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Log.Warn("prune webhook deliveries", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Timer.After(pruneEvery):
		}
	}
}

// prune fails the deliveries still pending at the end of their window
// and deletes the ended ones past the retention or beyond the newest
// Keep of their endpoint.
func (s *Service) prune(ctx context.Context) error {
	now := s.cfg.Clock.Now()
	// Expired deliveries leave their endpoints' backlogs.
	defer s.backlog.forget()
	return s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.ExpireWebhookDeliveries(ctx, now.Add(-RetryWindow), now); err != nil {
			return err
		}
		_, err := tx.PruneWebhookDeliveries(ctx, now.Add(-s.cfg.Retention), s.cfg.Keep)
		return err
	})
}
