package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer is the producer tier of one tool: a Counter, the Hook to
// install in its producing client, and a Reporter publishing through a
// client of its own.
type Producer struct {
	Counter *Counter
	Hook    *Hook
	cl      *kgo.Client
	rep     *Reporter
}

// StartProducer starts the producer tier for a producer writing to
// bootstrap: counts in windows of window (0: DefaultWindow), published
// every interval (0: only at Close).
func StartProducer(client []kgo.Opt, window, interval time.Duration, log *slog.Logger) (*Producer, error) {
	c, err := NewCounter(TierProducer, "", window)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(client...)
	if err != nil {
		return nil, fmt.Errorf("audit: client: %w", err)
	}
	return &Producer{Counter: c, Hook: NewHook(c), cl: cl, rep: NewReporter(c, cl, interval, log)}, nil
}

// Close publishes the counts not yet published (call it after the
// producer flushed) and closes the client.
func (p *Producer) Close(ctx context.Context) error {
	err := p.rep.Close(ctx)
	p.cl.Close()
	return err
}
