package audit

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Hook counts the records a franz-go producer had acknowledged, into a
// Counter of the producer tier (records to the _audit topic itself are not
// counted). Install it with kgo.WithHooks and publish with a Reporter:
//
//	counter, _ := audit.NewCounter(audit.TierProducer, "", audit.DefaultWindow)
//	cl, _ := kgo.NewClient(kgo.SeedBrokers(b), kgo.WithHooks(audit.NewHook(counter)))
//	rep := audit.NewReporter(counter, cl, time.Minute, nil)
//	defer rep.Close(ctx) // before cl.Close
//
// A record is counted by its timestamp (franz-go sets it when Produce is
// called, unless the caller did) and its key and value bytes.
type Hook struct{ counter *Counter }

// NewHook returns a hook counting into counter.
func NewHook(counter *Counter) *Hook { return &Hook{counter: counter} }

var _ kgo.HookProduceRecordUnbuffered = (*Hook)(nil)

// OnProduceRecordUnbuffered counts r when it was acknowledged (err nil).
func (h *Hook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil || r.Topic == Topic {
		return
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.UnixMilli(-1)
	}
	h.counter.Add(r.Topic, ts, int64(len(r.Key)+len(r.Value)))
}
