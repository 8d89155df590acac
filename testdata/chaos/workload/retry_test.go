package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/history"
)

// ackLoser is a franz-go dialer whose connections lose the answer to the
// first Produce request of the client: the broker reads and appends the
// request, its answer is read off the socket and dropped, and the
// connection closes, as when a broker is killed between its append and
// its answer. The client sends the record again on a new connection.
type ackLoser struct {
	dropped atomic.Bool
}

func (a *ackLoser) dial(ctx context.Context, network, host string) (net.Conn, error) {
	return dialWrapped(ctx, network, host, func(c net.Conn) net.Conn { return &ackLosingConn{Conn: c, a: a} })
}

// dialWrapped dials host and wraps the connection (a franz-go Dialer's
// body, for a test's tampering connection).
func dialWrapped(ctx context.Context, network, host string, wrap func(net.Conn) net.Conn) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return wrap(c), nil
}

type ackLosingConn struct {
	net.Conn
	a        *ackLoser
	mu       sync.Mutex
	produced bool // a Produce request was written on this connection
}

// Write notes a Produce request (franz-go writes each request, its size
// and header first, in one Write).
func (c *ackLosingConn) Write(p []byte) (int, error) {
	if len(p) >= 6 && int16(binary.BigEndian.Uint16(p[4:6])) == kmsg.Produce.Int16() {
		c.mu.Lock()
		c.produced = true
		c.mu.Unlock()
	}
	return c.Conn.Write(p)
}

// Read drops the first answer to a Produce request: the bytes after the
// request was written are its answer (franz-go keeps Produce requests on
// a connection of their own, and ApiVersions is answered before them).
func (c *ackLosingConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	produced := c.produced
	c.mu.Unlock()
	if produced && !c.a.dropped.Load() {
		if _, err := c.Conn.Read(p); err != nil {
			return 0, err
		}
		if c.a.dropped.CompareAndSwap(false, true) {
			c.Conn.Close()
			return 0, errors.New("ackLoser: the answer to a Produce was dropped")
		}
	}
	return c.Conn.Read(p)
}

// The duplicate rule through a real broker: a produce whose answer is
// lost is sent again by the client. A non-idempotent (acks=1) producer's
// value is then in the log twice, which the history allows as Kafka's
// semantics (Attempts 2, one retry duplicate); an idempotent producer's
// value is in it once. Either way the Producer counts the two Produce
// requests, and the history is clean.
func TestLostAckRetriedProduceIsCounted(t *testing.T) {
	for _, c := range []struct {
		name       string
		cfg        ProducerConfig
		positions  int // of the value in the final read
		retryDups  int
		idempotent bool
	}{
		{"acks=1", ProducerConfig{Acks: AcksLeader}, 2, 1, false},
		{"idempotent", ProducerConfig{Acks: AcksAll, Idempotent: true}, 1, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const topic = "lostack"
			addr := startBroker(t, topic, 1)
			rec := history.NewRecorder(nil)
			loser := &ackLoser{}
			cfg := c.cfg
			cfg.Bootstrap, cfg.Topic, cfg.Process = addr, topic, 1
			cfg.Options = []kgo.Opt{kgo.Dialer(loser.dial)}
			p, err := NewProducer(rec, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			op := p.Produce(ctx)
			if op.Outcome != history.OK || !loser.dropped.Load() {
				t.Fatalf("produce %v (answer dropped: %v), want ok after a dropped answer", op, loser.dropped.Load())
			}
			if op.Attempts != 2 || op.Idempotent != c.idempotent {
				t.Fatalf("produce recorded as %v: want sent=2, idempotent %v", op, c.idempotent)
			}
			final, err := FinalRead(ctx, rec, 2, addr, topic)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range final.Records {
				if r.Value == op.Value {
					n++
				}
			}
			if n != c.positions {
				t.Fatalf("%q at %d positions, want %d: %v", op.Value, n, c.positions, final.Records)
			}
			h := checkClean(t, rec)
			if got := history.Check(h).Stats.RetryDuplicates; got != c.retryDups {
				t.Fatalf("%d retry duplicates, want %d", got, c.retryDups)
			}
			// Counted once, the same log is a duplicate.
			h[op.ID].Attempts = 1
			if res := history.Check(h); c.positions > 1 && res.OK() {
				t.Fatalf("a value at %d positions from one send passed:\n%s", n, res.Report(h, 1))
			}
		})
	}
}
