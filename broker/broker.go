// Package broker runs a sluice broker from start to clean shutdown: the
// Kafka-protocol server (broker/server) over the partition logs of a data
// directory, and the Prometheus /metrics endpoint. cmd/sluice only turns
// flags into Options.
//
// With zookeeper.connect set (--zookeeper) the broker joins a cluster
// (cluster.go): it registers in ZooKeeper (broker/cluster) before it
// serves, and a clean stop first moves its leaderships to other in-sync
// replicas (controlled shutdown), then closes the server, then leaves the
// cluster.
//
// Usage:
//
//	b, err := broker.Start(broker.Options{DataDir: dir, Listen: "127.0.0.1:9092", Config: config.Default()})
//	if err != nil { ... }
//	fmt.Println("listening on", b.Addr())
//	err = b.Run(ctx) // serves until ctx ends, then shuts down cleanly
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/server"
)

// DefaultShutdownTimeout bounds a clean shutdown: connections still busy
// after it are closed hard (the logs are closed cleanly either way).
const DefaultShutdownTimeout = 30 * time.Second

// Options configure a Broker.
type Options struct {
	DataDir string // partition logs and metadata; created if missing (required)
	// Listen is the Kafka-protocol address of the first listener (of
	// Config.Security.Listeners, or the only, PLAINTEXT one); port 0 picks a
	// free one. The other listeners bind their own addresses.
	Listen string
	Config config.Broker // broker properties; the zero value means config.Default()
	// MetricsListen serves Prometheus /metrics there; "" = no endpoint.
	MetricsListen   string
	Logger          *slog.Logger  // nil = slog.Default()
	ShutdownTimeout time.Duration // 0 = DefaultShutdownTimeout
}

// Broker is a running broker: listeners bound, data directory open (and
// locked), and in cluster mode registered in the cluster.
type Broker struct {
	opts    Options
	logger  *slog.Logger
	srv     *server.Server
	member  *member         // nil on a single node
	ln      net.Listener    // the first listener
	lns     []boundListener // every listener, the first first
	mln     net.Listener    // nil without MetricsListen
	metrics *http.Server
}

// Start opens (recovering) the data directory and binds the listeners; it
// does not serve yet. On error nothing stays open or locked.
func Start(opts Options) (*Broker, error) {
	if opts.DataDir == "" {
		return nil, errors.New("broker: a data directory is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: data directory: %w", err)
	}
	lns, err := bindListeners(opts)
	if err != nil {
		return nil, err
	}
	closeAll := func() {
		for _, l := range lns {
			_ = l.ln.Close()
		}
	}
	b := &Broker{opts: opts, logger: opts.Logger, ln: lns[0].ln, lns: lns}
	sopts := server.Options{DataDir: opts.DataDir, Config: opts.Config, Logger: opts.Logger}
	if opts.Config.ZookeeperConnect != "" {
		if b.member, err = join(opts, lns); err != nil {
			closeAll()
			return nil, err
		}
		sopts.Cluster = b.member.node
	}
	srv, err := server.New(sopts)
	if err != nil {
		closeAll()
		b.member.leave()
		return nil, err
	}
	b.srv = srv
	b.member.serve(srv)
	fail := func(err error) (*Broker, error) {
		closeAll()
		_ = srv.Shutdown(context.Background())
		b.member.leave()
		return nil, err
	}
	if opts.MetricsListen != "" {
		if b.mln, err = net.Listen("tcp", opts.MetricsListen); err != nil {
			return fail(fmt.Errorf("broker: metrics listen %s: %w", opts.MetricsListen, err))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", srv.MetricsHandler())
		b.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	}
	return b, nil
}

// Addr is the bound Kafka-protocol address of the first listener.
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// ListenerAddr is the bound address of the listener named name (Kafka's
// listener name, such as SASL_SSL), nil if there is none.
func (b *Broker) ListenerAddr(name string) net.Addr {
	for _, l := range b.lns {
		if l.name == name {
			return l.ln.Addr()
		}
	}
	return nil
}

// boundListener is one bound listener; name "" is the implicit PLAINTEXT
// one of a configuration without listeners.
type boundListener struct {
	name string
	ln   net.Listener
}

// bindListeners binds every listener: Options.Listen for the first.
func bindListeners(opts Options) ([]boundListener, error) {
	specs := opts.Config.Security.Listeners
	if len(specs) == 0 {
		ln, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			return nil, fmt.Errorf("broker: listen %s: %w", opts.Listen, err)
		}
		return []boundListener{{"", ln}}, nil
	}
	var out []boundListener
	for i, l := range specs {
		addr := l.Addr
		if i == 0 && opts.Listen != "" {
			addr = opts.Listen
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, o := range out {
				_ = o.ln.Close()
			}
			return nil, fmt.Errorf("broker: listener %s: listen %s: %w", l.Name, addr, err)
		}
		out = append(out, boundListener{l.Name, ln})
	}
	return out, nil
}

// MetricsAddr is the bound metrics address, nil without MetricsListen.
func (b *Broker) MetricsAddr() net.Addr {
	if b.mln == nil {
		return nil
	}
	return b.mln.Addr()
}

// Run serves until ctx ends or serving fails, then shuts down cleanly
// (within Options.ShutdownTimeout): stop accepting, let connections finish,
// close the partition logs (writing the clean-shutdown marker) and release
// the data directory. It returns nil after a clean shutdown requested by
// ctx, else the first error.
func (b *Broker) Run(ctx context.Context) error {
	if b.metrics != nil {
		b.logger.Info("metrics endpoint", "metrics_addr", b.mln.Addr().String(), "path", "/metrics")
		go func() { _ = b.metrics.Serve(b.mln) }()
	}
	serveErr := make(chan error, len(b.lns))
	for _, l := range b.lns {
		go func() { serveErr <- b.srv.ServeListener(l.ln, l.name) }()
	}
	var runErr error
	select {
	case <-ctx.Done():
		b.logger.Info("shutting down", "reason", context.Cause(ctx).Error())
	case err := <-serveErr:
		runErr = fmt.Errorf("broker: serve: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), b.opts.ShutdownTimeout)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// Shutdown stops the broker as Run does when its context ends. Run calls it;
// call it directly only for a Broker that was started but never run.
func (b *Broker) Shutdown(ctx context.Context) error {
	if b.metrics != nil {
		_ = b.metrics.Shutdown(ctx)
	}
	if b.mln != nil {
		_ = b.mln.Close() // if it was never served
	}
	cctx, cancel := context.WithTimeout(ctx, b.opts.ShutdownTimeout/2) // leave time to close the logs
	b.member.controlledShutdown(cctx, b.logger)
	cancel()
	err := b.srv.Shutdown(ctx)
	for _, l := range b.lns {
		_ = l.ln.Close()
	}
	b.member.leave()
	if errors.Is(err, server.ErrClosed) {
		return nil
	}
	return err
}
