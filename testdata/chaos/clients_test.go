package chaos

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
)

// The scenarios' clients are testdata/chaos/workload's, which record every
// operation with its outcome; these run them in the background and bound
// them for a broker that is killed and paused under them.

// running is a workload in flight.
type running struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (l *running) stop() { l.cancel(); l.wg.Wait() }

// produceUnique starts n workload producers, processes first, first+1, ...,
// writing unique values to the parts partitions of topic in turn, one record
// at a time, with acks (acks=all idempotent, as franz-go's default). Process numbers must not repeat in a run. encode
// turns a value into the record's bytes (nil: the value itself); pace is the
// pause between two records of one producer (0: none), which bounds the
// rate for workloads slower than the broker (the loader).
func produceUnique(ctx context.Context, t *testing.T, rec *history.Recorder, addr, topic string, parts int32, acks workload.Acks, first, n int, encode func(string) []byte, pace time.Duration) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	l := &running{cancel: cancel}
	for proc := first; proc < first+n; proc++ {
		p, err := workload.NewProducer(rec, workload.ProducerConfig{Bootstrap: []string{addr}, Topic: topic, Partitions: parts,
			Process: proc, Acks: acks, Idempotent: acks == workload.AcksAll, Encode: encode, Timeout: 4 * time.Second,
			// a produce to a killed or paused broker gives up within seconds: unknown
			Options: []kgo.Opt{kgo.ProduceRequestTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(time.Second), kgo.RetryTimeout(4 * time.Second)}})
		if err != nil {
			cancel()
			l.wg.Wait()
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer p.Close()
			for ctx.Err() == nil {
				p.Produce(ctx)
				if pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pace): // the workload's rate
					}
				}
			}
		}()
	}
	return l
}

// finalRead is workload.FinalReadDecoded of every partition of topic after
// the faults, given a minute while the broker comes back. It returns the
// final-read operation.
func finalRead(t *testing.T, rec *history.Recorder, addr, topic string) history.Op {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op, err := workload.FinalReadDecoded(ctx, rec, 0, []string{addr}, topic, recordValueOf)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// recordValueOf is the unique value a record carries: the record itself, or
// the "id" field of a JSON record (the loader's workload writes JSON).
func recordValueOf(b []byte) string {
	if len(b) > 0 && b[0] == '{' {
		var v struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(b, &v) == nil && v.ID != "" {
			return v.ID
		}
	}
	return string(b)
}
