package interop

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestSluiceKill9DuringProduce kills the broker with SIGKILL in the middle
// of an idempotent acks=all produce stream, restarts it on the same data
// directory and checks that every acknowledged record is readable at its
// acknowledged offset and that each partition's offsets are contiguous; three
// kill/restart cycles, then appends after the last restart continue the
// offsets.
func TestSluiceKill9DuringProduce(t *testing.T) {
	s := kafka.StartSluice(t)
	const partitions, cycles, killAfter = 2, 3, 2000
	topic := newTopicName("kill9")
	createTopic(t, s.Addr, topic, partitions)

	type pos struct {
		p int32
		o int64
	}
	var (
		mu    sync.Mutex
		acked = map[pos]string{}
		ends  map[int32]int64
	)
	for cycle := 0; cycle < cycles; cycle++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.DefaultProduceTopic(topic),
			kgo.ProducerLinger(time.Millisecond), kgo.RecordRetries(2), kgo.RecordDeliveryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		target := len(acked) + killAfter
		mu.Unlock()
		reached := make(chan struct{})
		var once sync.Once
		ctx, stop := context.WithCancel(context.Background())
		var producer sync.WaitGroup
		producer.Add(1)
		go func() {
			defer producer.Done()
			for i := 0; ctx.Err() == nil; i++ {
				v := fmt.Sprintf("cycle-%d-record-%07d", cycle, i)
				cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
					if err != nil {
						return
					}
					mu.Lock()
					acked[pos{r.Partition, r.Offset}] = string(r.Value)
					n := len(acked)
					mu.Unlock()
					if n >= target {
						once.Do(func() { close(reached) })
					}
				})
			}
		}()
		select {
		case <-reached:
		case <-time.After(60 * time.Second):
			stop()
			producer.Wait()
			cl.Close()
			t.Fatalf("cycle %d: acknowledgements stalled below %d in 60s", cycle, target)
		}
		s.Kill() // mid-stream: the producer is still sending
		stop()
		producer.Wait()
		cl.Close() // fails whatever was in flight; those records were never acknowledged
		mu.Lock()
		n := len(acked)
		mu.Unlock()

		s.Restart(t)
		ends = endOffsets(t, s.Addr, topic)
		var total int
		for _, e := range ends {
			total += int(e)
		}
		t.Logf("cycle %d: killed after %d acknowledged records in all; %d records after the restart (end offsets %v)", cycle, n, total, ends)
		got := consumeAll(t, s.Addr, topic, partitions, total)
		sortRecords(got)
		checkContiguous(t, got)
		at := map[pos]string{}
		for _, r := range got {
			at[pos{r.Partition, r.Offset}] = string(r.Value)
		}
		mu.Lock()
		for k, v := range acked {
			if at[k] != v {
				mu.Unlock()
				t.Fatalf("cycle %d: acknowledged %q at %d/%d, after the restart it reads %q", cycle, v, k.p, k.o, at[k])
			}
		}
		mu.Unlock()
	}

	// Appends after the restart continue the offsets without a gap.
	cl2, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := int32(0); p < partitions; p++ {
		r, err := cl2.ProduceSync(pctx, &kgo.Record{Partition: p, Value: []byte("after-restart")}).First()
		if err != nil {
			t.Fatalf("produce after restart: %v", err)
		}
		if r.Offset != ends[p] {
			t.Fatalf("partition %d: first offset after restart %d, want %d", p, r.Offset, ends[p])
		}
	}
}
