package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnsureTopic creates the _audit topic (compacted, one partition) unless it
// exists.
func EnsureTopic(ctx context.Context, cl *kgo.Client) error {
	adm := kadm.NewClient(cl)
	cleanup := "compact"
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &cleanup}, Topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("audit: creating %s: %w", Topic, err)
	}
	return nil
}

// Publish writes counts to the _audit topic through cl, waiting for every
// acknowledgement.
func Publish(ctx context.Context, cl *kgo.Client, counts []Count) error {
	if len(counts) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, 0, len(counts))
	for _, c := range counts {
		v, err := json.Marshal(c)
		if err != nil {
			return err
		}
		recs = append(recs, &kgo.Record{Topic: Topic, Key: []byte(c.Key()), Value: v, Timestamp: c.Updated})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("audit: publishing %d counts to %s: %w", len(recs), Topic, err)
	}
	return nil
}

// Reporter publishes a Counter's changed counts every interval from its
// own goroutine, and once more at Close.
type Reporter struct {
	counter *Counter
	cl      *kgo.Client
	log     *slog.Logger
	stop    chan struct{}
	done    chan struct{}

	mu sync.Mutex // serialises publishing
	// Guarded by mu.
	ensured bool // the _audit topic exists
}

// NewReporter publishes counter's counts through cl (which it does not
// close) every interval (0: only at Flush and Close). It creates the
// _audit topic when it publishes first.
func NewReporter(counter *Counter, cl *kgo.Client, interval time.Duration, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.Default()
	}
	r := &Reporter{counter: counter, cl: cl, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop(interval)
	return r
}

func (r *Reporter) loop(interval time.Duration) {
	defer close(r.done)
	if interval <= 0 {
		<-r.stop
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), interval+10*time.Second)
			if err := r.Flush(ctx); errors.Is(err, ErrDropped) {
				r.log.Warn("audit: records not counted (their counts are missing from "+Topic+")", "err", err)
			} else if err != nil {
				r.log.Warn("audit: publishing counts failed; retried at the next interval", "err", err)
			}
			cancel()
		}
	}
}

// Flush publishes the counts changed since the last publish.
func (r *Reporter) Flush(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.ensured {
		if err := EnsureTopic(ctx, r.cl); err != nil {
			return err
		}
		r.ensured = true
	}
	counts := r.counter.changed()
	if err := Publish(ctx, r.cl, counts); err != nil {
		r.counter.markDirty(counts)
		return err
	}
	r.counter.evict()
	if n := r.counter.Dropped(); n > 0 {
		return fmt.Errorf("%w: %d records (more than %d windows)", ErrDropped, n, MaxCells)
	}
	return nil
}

// Close stops the goroutine and publishes what is left.
func (r *Reporter) Close(ctx context.Context) error {
	close(r.stop)
	<-r.done
	return r.Flush(ctx)
}
