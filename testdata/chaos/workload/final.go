package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
)

// FinalRead reads every partition of topic from its log start to its high
// watermark (listed first) and records one final-read whose Ranges are
// those [start, end). ctx bounds it: a read cut short is recorded as fail
// (it covers nothing) and returned as an error.
func FinalRead(ctx context.Context, rec *history.Recorder, process int, bootstrap []string, topic string) (history.Op, error) {
	return FinalReadDecoded(ctx, rec, process, bootstrap, topic, nil)
}

// FinalReadDecoded is FinalRead of records a ProducerConfig.Encode wrote:
// decode turns a record's bytes back into its value (nil: the bytes are
// the value).
func FinalReadDecoded(ctx context.Context, rec *history.Recorder, process int, bootstrap []string, topic string, decode func([]byte) string) (history.Op, error) {
	inv := rec.Invoke(process, history.FinalRead)
	fail := func(err error) (history.Op, error) {
		err = fmt.Errorf("workload: final read of %s: %w", topic, err)
		return inv.Complete(history.Op{Outcome: history.Fail, Error: err.Error()}), err
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return fail(err)
	}
	defer adm.Close()
	starts, err := kadm.NewClient(adm).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fail(err)
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fail(err)
	}
	var ranges []history.Range
	offs := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition → the last offset still to read
	ends.Each(func(e kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, e.Partition)
		ranges = append(ranges, history.Range{Topic: topic, Partition: e.Partition, Start: s.Offset, End: e.Offset})
		if e.Offset > s.Offset {
			offs[e.Partition] = kgo.NewOffset().At(s.Offset)
			left[e.Partition] = e.Offset - 1
		}
	})
	var recs []history.Record
	if len(offs) > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
		if err != nil {
			return fail(err)
		}
		defer cl.Close()
		for len(left) > 0 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				if last, ok := left[r.Partition]; ok && r.Offset <= last {
					v := string(r.Value)
					if decode != nil {
						v = decode(r.Value)
					}
					recs = append(recs, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: v})
					if r.Offset == last {
						delete(left, r.Partition)
					}
				}
			})
		}
	}
	return inv.Complete(history.Op{Outcome: history.OK, Records: recs, Ranges: ranges}), nil
}
