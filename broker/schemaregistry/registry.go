package schemaregistry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTopic is the topic the registry stores its records in.
const DefaultTopic = "_schemas"

// Options configures a Registry. Only Bootstrap is required.
type Options struct {
	// Bootstrap lists Kafka-protocol brokers (HOST:PORT) holding the topic.
	Bootstrap []string
	// Topic is the compacted topic of the registry's records; "" = _schemas.
	Topic string
	// Logger receives the registry's logs; nil = slog.Default().
	Logger *slog.Logger
	// MaxRequestBytes bounds a request body; 0 = 1 MiB.
	MaxRequestBytes int64
	// WriteTimeout bounds how long a request waits for the topic (a write
	// to be applied, or a catch-up); 0 = 15 s.
	WriteTimeout time.Duration
	// BodyTimeout bounds how long a request's body may take to arrive once
	// its headers are in; a slower one is refused with 408. 0 = 5 s. It is
	// set on the connection by Serve's server; a Handler mounted in another
	// server relies on that server's ReadTimeout.
	BodyTimeout time.Duration
	// MaxCheckSteps bounds the work of one request's compatibility check
	// (see DefaultMaxCheckSteps, the default when 0); a check that needs
	// more is refused with 42201.
	MaxCheckSteps int
	// ClientOpts are extra franz-go options for the registry's clients (TLS,
	// SASL, dialer).
	ClientOpts []kgo.Opt
	// Auth, when set, requires HTTP basic authentication and checks each
	// request against the user's subject grants (see auth.go).
	Auth *Auth
	// TLS, when set, makes Serve answer HTTPS only (Handler is unchanged).
	TLS *tls.Config

	hooks hooks // the package's tests only
}

// hooks let the package's tests see and pace requests at points of
// interest; a nil func is skipped.
type hooks struct {
	checking    func(subject string) // a compatibility check starts, outside the locks
	readingBody func()               // a request starts reading its body
}

// Registry is a Confluent-compatible schema registry whose state lives in a
// Kafka topic. Create it with New, serve its Handler (or call Serve), and
// Close it.
type Registry struct {
	opts    Options
	logger  *slog.Logger
	store   *store
	metrics *metrics
	handler http.Handler
	hooks   hooks
	// slots are the work slots of requests with a body; bodyBytes is
	// the budget of body bytes read or held (maxBodiesInFlight times
	// MaxRequestBytes).
	slots     chan struct{}
	bodyBytes *byteBudget

	mu      sync.Mutex
	servers []*http.Server
	closed  bool
}

// New connects to the brokers, creates the topic if it is missing and reads
// it from the start; it returns once the registry has caught up (bounded by
// ctx).
func New(ctx context.Context, opts Options) (*Registry, error) {
	if len(opts.Bootstrap) == 0 {
		return nil, errors.New("schemaregistry: no bootstrap brokers; pass --bootstrap HOST:PORT")
	}
	if opts.Topic == "" {
		opts.Topic = DefaultTopic
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = 1 << 20
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 15 * time.Second
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = 5 * time.Second
	}
	if opts.MaxCheckSteps <= 0 {
		opts.MaxCheckSteps = DefaultMaxCheckSteps
	}
	m := newMetrics()
	st, err := openStore(ctx, opts, m)
	if err != nil {
		return nil, err
	}
	r := &Registry{
		opts: opts, logger: opts.Logger, store: st, metrics: m, hooks: opts.hooks,
		slots:     make(chan struct{}, maxBodiesInFlight),
		bodyBytes: newByteBudget(maxBodiesInFlight * (opts.MaxRequestBytes + bodyChunk)),
	}
	r.handler = r.routes()
	return r, nil
}

// Handler serves the REST API, and Prometheus metrics at /metrics.
func (r *Registry) Handler() http.Handler { return r.handler }

// Serve answers HTTP requests on ln until Close; it returns nil after Close.
func (r *Registry) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           r.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(r.logger.Handler(), slog.LevelWarn),
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = ln.Close()
		return ErrClosed
	}
	r.servers = append(r.servers, srv)
	r.mu.Unlock()
	if r.opts.TLS != nil {
		cfg := r.opts.TLS.Clone()
		if cfg.MinVersion < tls.VersionTLS12 {
			cfg.MinVersion = tls.VersionTLS12
		}
		ln = tls.NewListener(ln, cfg)
	}
	r.logger.Info("schema registry serving", "addr", ln.Addr().String(), "topic", r.opts.Topic, "tls", r.opts.TLS != nil, "auth", r.opts.Auth != nil)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("schemaregistry: serve %s: %w", ln.Addr(), err)
	}
	return nil
}

// Close stops the HTTP servers started by Serve (waiting for requests in
// flight until ctx ends) and the topic reader.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	servers := r.servers
	r.mu.Unlock()
	var err error
	for _, srv := range servers {
		err = errors.Join(err, srv.Shutdown(ctx))
	}
	r.store.close()
	return err
}

func (r *Registry) metricsHandler() http.Handler {
	return promhttp.HandlerFor(r.metrics.reg, promhttp.HandlerOpts{})
}
