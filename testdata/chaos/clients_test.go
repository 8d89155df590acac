package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
)

// The thin Kafka clients of the broker scenarios: producers of unique
// values and the final read, each operation recorded in the history with
// its outcome. An error is recorded as unknown (a timeout or a cut
// connection may or may not have taken effect); only the checker judges.

// running is a workload in flight.
type running struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (l *running) stop() { l.cancel(); l.wg.Wait() }

// produceUnique starts n producers, processes first, first+1, ..., writing
// values "<process>-<i>" to the partitions of topic in turn, one record at a
// time, with acks "all" or "1". Process numbers must not repeat in a run.
// encode turns a value into the record's bytes (nil: the value itself);
// pace is the pause between two records of one producer (0: none), which
// bounds the rate for workloads slower than the broker (the loader).
func produceUnique(ctx context.Context, t *testing.T, rec *history.Recorder, addr, topic, acks string, first, n int, encode func(string) []byte, pace time.Duration) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	l := &running{cancel: cancel}
	parts := partitions(t, addr, topic)
	for p := first; p < first+n; p++ {
		opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(4 * time.Second), kgo.ProduceRequestTimeout(2 * time.Second),
			kgo.RequestTimeoutOverhead(time.Second), kgo.RetryTimeout(4 * time.Second)}
		if acks == "1" {
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
		} else {
			opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer cl.Close()
			for i := 0; ctx.Err() == nil; i++ {
				part := int32(i) % parts
				value := fmt.Sprintf("%d-%d", p, i)
				op := rec.Invoke(p, history.Produce)
				pctx, pcancel := context.WithTimeout(ctx, 6*time.Second)
				raw := []byte(value)
				if encode != nil {
					raw = encode(value)
				}
				r, err := cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: part, Value: raw}).First()
				pcancel()
				if err != nil {
					op.Complete(history.Op{Outcome: history.Unknown, Topic: topic, Partition: part, Offset: -1, Value: value, Error: err.Error()})
					continue
				}
				op.Complete(history.Op{Outcome: history.OK, Topic: topic, Partition: r.Partition, Offset: r.Offset, Value: value})
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

// partitions is how many partitions topic has.
func partitions(t *testing.T, addr, topic string) int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := md.Topics[topic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		t.Fatalf("topic %s: %+v", topic, d)
	}
	return int32(len(d.Partitions))
}

// finalRead reads every partition of topic from the start to its high
// watermark, after the faults, as one final-read operation. It retries
// for up to a minute while the broker comes back.
func finalRead(t *testing.T, rec *history.Recorder, addr, topic string, parts int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op := rec.Invoke(0, history.FinalRead)
	recs, ranges, err := readPartitions(ctx, addr, topic, parts)
	if err != nil {
		op.Complete(history.Op{Outcome: history.Fail, Error: err.Error()})
		t.Fatalf("final read: %v", err)
	}
	op.Complete(history.Op{Outcome: history.OK, Records: recs, Ranges: ranges})
}

func readPartitions(ctx context.Context, addr, topic string, parts int32) ([]history.Record, []history.Range, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, nil, err
	}
	defer adm.Close()
	var ends kadm.ListedOffsets
	for {
		ends, err = kadm.NewClient(adm).ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("list end offsets: %w", err)
		case <-time.After(200 * time.Millisecond): // the broker restarting
		}
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	var ranges []history.Range
	want := 0
	for p := int32(0); p < parts; p++ {
		end, _ := ends.Lookup(topic, p)
		offsets[topic][p] = kgo.NewOffset().AtStart()
		ranges = append(ranges, history.Range{Topic: topic, Partition: p, Start: 0, End: end.Offset})
		want += int(end.Offset)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	var recs []history.Record
	next := map[int32]int64{}
	for done := 0; done < want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("read %d of %d records: %w", done, want, ctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ranges[r.Partition].End || r.Offset < next[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			recs = append(recs, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: recordValueOf(r.Value)})
			done++
		})
		_ = ferr // transient fetch errors while reading: the loop retries
	}
	return recs, ranges, nil
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
