package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// benchProduce produces b.N records of size bytes to topic and waits for
// every acknowledgement.
func benchProduce(b *testing.B, addr, topic string, size int, opts ...kgo.Opt) {
	cl := newClient(b, addr, append([]kgo.Opt{kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(1 << 16)}, opts...)...)
	value := make([]byte, size)
	var failed atomic.Value
	ctx := context.Background()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkProduce(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, acks := range []string{"1", "all"} {
			b.Run(fmt.Sprintf("%dB/acks=%s", size, acks), func(b *testing.B) {
				ts := startServer(b, "", nil)
				topic := "bench"
				if _, err := kadm.NewClient(newClient(b, ts.addr)).CreateTopic(context.Background(), 1, 1, nil, topic); err != nil {
					b.Fatal(err)
				}
				var opts []kgo.Opt
				if acks == "1" {
					opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
				}
				benchProduce(b, ts.addr, topic, size, opts...)
			})
		}
	}
}

func BenchmarkFetch(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			ts := startServer(b, "", nil)
			if _, err := kadm.NewClient(newClient(b, ts.addr)).CreateTopic(context.Background(), 1, 1, nil, "bench"); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			benchProduce(b, ts.addr, "bench", size)
			cl := newClient(b, ts.addr, kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			b.SetBytes(int64(size))
			b.ResetTimer()
			b.StartTimer()
			n := 0
			for n < b.N {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					b.Fatalf("consumed %d of %d", n, b.N)
				}
				n += fs.NumRecords()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
