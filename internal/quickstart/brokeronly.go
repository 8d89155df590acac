package quickstart

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokerOnly is the broker part alone: a broker over DIR/broker, the
// pageviews topic, page views produced as JSON and read back.
func BrokerOnly(ctx context.Context, opts Options) error {
	e, err := newEnv(opts)
	if err != nil {
		return err
	}
	defer e.stop()
	opts = e.opts // with the defaults
	e.step("starting a sluice broker in %s", opts.Dir)
	if err := e.startBroker(); err != nil {
		return fmt.Errorf("quickstart: broker: %w", err)
	}
	fmt.Fprintf(e.out, "    broker %s\n", e.broker)
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ConsumeTopics(Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	e.step("creating the topic %s (3 partitions)", Topic)
	if err := createTopic(ctx, cl); err != nil {
		return err
	}
	now := opts.Clock.Now()
	views := generate(opts.Events, now.Add(-time.Duration(opts.Hours)*time.Hour), now, 1)
	e.step("producing %d page views as JSON (zstd batches, keyed by user)", len(views))
	recs := make([]*kgo.Record, len(views))
	for i, v := range views {
		recs[i] = &kgo.Record{Topic: Topic, Key: []byte(v.key), Value: jsonLine(v.value), Timestamp: v.at}
	}
	t0 := time.Now()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("quickstart: producing: %w", err)
	}
	fmt.Fprintf(e.out, "    %d records in %s\n", len(recs), time.Since(t0).Round(time.Millisecond))
	e.step("reading them back")
	got := 0
	for got < len(recs) {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := cl.PollFetches(fctx)
		cancel()
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("quickstart: consuming: %w (read %d of %d)", err, got, len(recs))
		}
		got += fs.NumRecords()
	}
	fmt.Fprintf(e.out, "    read back %d of %d records\n", got, len(recs))
	e.stop()
	e.step("done: the broker stopped; its data stays in %s", opts.Dir)
	return nil
}
