// Package sluice is the test harness for a sluice broker running inside the
// test process (broker/server on a loopback port), and for what the tests
// around it share: creating a topic, producing numbered JSON records, and
// counting the record ids in loaded JSON-lines output.
//
//	test ──► StartBroker(t, BrokerOptions{}) ──► server.New + Listen("127.0.0.1:0")
//	     ──► CreateTopic / Produce(t, addr, ...) ──► franz-go client
//	     ──► LoadedIDs(dir) ──► *.jsonl under dir (not under _sluice)
//
// It is the one in-process broker start of the tests outside broker/server
// (whose own tests cannot import it: it imports broker/server). A test that
// needs the broker as a separate process, to kill it or run it under -race
// apart, uses testdata/harness/kafka's StartSluice instead.
package sluice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/server"
)

// BrokerOptions configure an in-process broker; zero values are the defaults.
type BrokerOptions struct {
	// DataDir is the broker's data directory (StartBroker: "" is a new
	// t.TempDir(); NewBroker requires it).
	DataDir string
	// Listen is the address to bind ("" is 127.0.0.1:0, a free port). A
	// restart passes the previous Addr so clients keep their address.
	Listen string
	// Config is the broker configuration (nil is config.Default()).
	Config *config.Broker
	// Logger receives the broker's log (nil discards it).
	Logger *slog.Logger
}

// Broker is a sluice broker serving in this process.
type Broker struct {
	// Server is the running server.
	Server *server.Server
	// Addr is the bound Kafka-protocol address, HOST:PORT.
	Addr string
	// DataDir is the broker's data directory.
	DataDir string
}

// StartBroker starts a broker and shuts it down at test cleanup (unless
// Stop was called before); a failure to start or to shut down fails t.
func StartBroker(t testing.TB, opts BrokerOptions) *Broker {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	b, err := NewBroker(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Errorf("sluice harness: %v", err)
		}
	})
	return b
}

// NewBroker starts a broker for a caller without a testing.TB (a fuzz
// target's process-wide broker, a benchmark); the caller stops it.
func NewBroker(opts BrokerOptions) (*Broker, error) {
	if opts.DataDir == "" {
		return nil, errors.New("sluice harness: NewBroker needs a data directory")
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	cfg := config.Default()
	if opts.Config != nil {
		cfg = *opts.Config
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv, err := server.New(server.Options{DataDir: opts.DataDir, Config: cfg, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("sluice harness: start broker on %s: %w", opts.DataDir, err)
	}
	addr, err := srv.Listen(opts.Listen)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, fmt.Errorf("sluice harness: %w", err)
	}
	return &Broker{Server: srv, Addr: addr.String(), DataDir: opts.DataDir}, nil
}

// Stop shuts the broker down, waiting up to 20 s for connections to end. A
// second Stop does nothing.
func (b *Broker) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.Server.Shutdown(ctx); err != nil && !errors.Is(err, server.ErrClosed) {
		return fmt.Errorf("shut down broker %s: %w", b.Addr, err)
	}
	return nil
}
