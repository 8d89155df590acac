package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/clock"
)

// BenchResult is a benchmark's final figures. Latencies are in milliseconds;
// MB is 2^20 bytes, as in Kafka's perf tools.
type BenchResult struct {
	Records  int64
	Bytes    int64
	Elapsed  time.Duration
	AvgMs    float64
	MaxMs    float64
	P50Ms    float64
	P95Ms    float64
	P99Ms    float64
	P999Ms   float64
	Produced bool // latencies are only measured when producing
	// Transactions is how many transactions a transactional producer
	// benchmark committed (0 otherwise).
	Transactions int64
}

// RecordsPerSec is the record throughput.
func (r BenchResult) RecordsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Records) / r.Elapsed.Seconds()
}

// MBPerSec is the byte throughput in MiB per second.
func (r BenchResult) MBPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / (1 << 20) / r.Elapsed.Seconds()
}

// String is the final line, in the shape of Kafka's ProducerPerformance.
func (r BenchResult) String() string {
	if !r.Produced {
		return fmt.Sprintf("%d records received, %.1f records/sec (%.2f MB/sec), %.2f MB in %.3f s",
			r.Records, r.RecordsPerSec(), r.MBPerSec(), float64(r.Bytes)/(1<<20), r.Elapsed.Seconds())
	}
	return fmt.Sprintf("%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, %.2f ms 50th, %.2f ms 95th, %.2f ms 99th, %.2f ms 99.9th.",
		r.Records, r.RecordsPerSec(), r.MBPerSec(), r.AvgMs, r.MaxMs, r.P50Ms, r.P95Ms, r.P99Ms, r.P999Ms)
}

// ProducerBenchOptions configures ProducerBench.
type ProducerBenchOptions struct {
	ProducerConfig
	// Topic to write to (created when Partitions > 0 and it is missing).
	Topic string
	// Records to send.
	Records int64
	// RecordSize is each value's size in bytes.
	RecordSize int
	// Throughput caps records per second; <= 0 means as fast as possible.
	Throughput float64
	// Partitions creates the topic with this many partitions when it does
	// not exist yet; 0 leaves it to auto-creation.
	Partitions int32
	// ReportInterval between progress lines (default 5s).
	ReportInterval time.Duration
	// Clock times the run, its progress lines and the throttle (nil =
	// clock.Real).
	Clock clock.Clock
	// TransactionalID makes the producer transactional (like
	// ProducerPerformance --transactional-id): records are sent in
	// transactions of TxnRecords records, each committed before the next
	// begins; latencies are still each record's acknowledgement.
	TransactionalID string
	// TxnRecords is the records per transaction (0: 1000); unused without
	// TransactionalID.
	TxnRecords int64
}

// window accumulates the progress of one report interval and the run.
type window struct {
	mu        sync.Mutex
	records   int64
	bytes     int64
	latSumUs  int64
	latMaxUs  int64
	totalB    int64
	latencies histogram // microseconds, every acknowledged record
	err       error
}

func (w *window) add(bytes int, lat time.Duration, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	us := lat.Microseconds()
	w.records++
	w.bytes += int64(bytes)
	w.latSumUs += us
	w.latMaxUs = max(w.latMaxUs, us)
	w.totalB += int64(bytes)
	w.latencies.record(us)
}

func (w *window) report(out io.Writer, d time.Duration) {
	w.mu.Lock()
	n, b, sum, mx := w.records, w.bytes, w.latSumUs, w.latMaxUs
	w.records, w.bytes, w.latSumUs, w.latMaxUs = 0, 0, 0, 0
	w.mu.Unlock()
	avg := 0.0
	if n > 0 {
		avg = float64(sum) / float64(n) / 1000
	}
	fmt.Fprintf(out, "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
		n, float64(n)/d.Seconds(), float64(b)/(1<<20)/d.Seconds(), avg, float64(mx)/1000)
}

// EnsureTopic creates topic with the given partitions unless it exists.
func EnsureTopic(ctx context.Context, bootstrap string, sec Security, topic string, partitions int32) error {
	adm, err := NewAdmin(bootstrap, sec)
	if err != nil {
		return err
	}
	defer adm.Close()
	_, err = adm.adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create topic %q: %w", topic, err)
	}
	return nil
}

// ProducerBench sends Records records of RecordSize bytes (one random
// upper-case payload, as Kafka's ProducerPerformance does), prints a progress
// line every ReportInterval to progress and returns the final figures.
func ProducerBench(ctx context.Context, opts ProducerBenchOptions, progress io.Writer) (BenchResult, error) {
	if err := opts.check(); err != nil {
		return BenchResult{}, err
	}
	if opts.TransactionalID != "" && opts.TxnRecords == 0 {
		opts.TxnRecords = 1000
	}
	clk := clock.OrReal(opts.Clock)
	interval := opts.ReportInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	kopts, err := opts.options()
	if err != nil {
		return BenchResult{}, err
	}
	if opts.Partitions > 0 {
		if err := EnsureTopic(ctx, opts.Bootstrap, opts.Security, opts.Topic, opts.Partitions); err != nil {
			return BenchResult{}, err
		}
	}
	kopts = append(kopts, kgo.DefaultProduceTopic(opts.Topic), kgo.AllowAutoTopicCreation(), kgo.MaxBufferedRecords(1<<16))
	if opts.TransactionalID != "" {
		kopts = append(kopts, kgo.TransactionalID(opts.TransactionalID))
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return BenchResult{}, fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()

	w := &window{}
	stopReports := w.reportEvery(clk, interval, progress)
	start := clk.Now()
	var txns int64
	var flushErr error
	if opts.TransactionalID != "" {
		txns, flushErr = produceTransactions(ctx, cl, clk, opts, benchPayload(opts.RecordSize), w)
	} else {
		produceRecords(ctx, cl, clk, opts, benchPayload(opts.RecordSize), w)
		flushErr = cl.Flush(ctx)
	}
	elapsed := clk.Now().Sub(start)
	stopReports()

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return BenchResult{}, fmt.Errorf("kafka: produce: %w", w.err)
	}
	if flushErr != nil {
		return BenchResult{}, fmt.Errorf("kafka: flush: %w", flushErr)
	}
	res := w.producedResult(elapsed)
	res.Transactions = txns
	return res, nil
}

// produceTransactions produces opts.Records records in transactions of
// opts.TxnRecords, committing each (flush, then EndTxn) before beginning the
// next; it returns how many committed. A transaction a failed produce or
// the context's end interrupts is aborted.
func produceTransactions(ctx context.Context, cl *kgo.Client, clk clock.Clock, opts ProducerBenchOptions, payload []byte, w *window) (int64, error) {
	var committed int64
	for sent := int64(0); sent < opts.Records; {
		n := min(opts.TxnRecords, opts.Records-sent)
		if err := cl.BeginTransaction(); err != nil {
			return committed, fmt.Errorf("begin transaction: %w", err)
		}
		batch := opts
		batch.Records = n
		produceRecords(ctx, cl, clk, batch, payload, w)
		sent += n
		w.mu.Lock()
		failed := w.err
		w.mu.Unlock()
		commit := kgo.TryCommit
		if failed != nil || ctx.Err() != nil {
			commit = kgo.TryAbort
		}
		if err := cl.Flush(ctx); err != nil {
			commit = kgo.TryAbort
			failed = err
		}
		// The end gets a context of its own: an interrupted run still
		// aborts its open transaction rather than leaving it to time out.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if commit == kgo.TryAbort {
			// franz-go ends a transaction only with nothing buffered.
			_ = cl.AbortBufferedRecords(ectx)
		}
		err := cl.EndTransaction(ectx, commit)
		cancel()
		if err != nil {
			return committed, fmt.Errorf("end transaction: %w", err)
		}
		if commit == kgo.TryAbort {
			return committed, failed
		}
		committed++
	}
	return committed, nil
}

// check refuses options ProducerBench cannot run with.
func (opts ProducerBenchOptions) check() error {
	if opts.Topic == "" {
		return badInput("--topic is required")
	}
	if opts.Records <= 0 || opts.RecordSize <= 0 {
		return badInput("--records and --record-size must be positive")
	}
	if opts.Partitions < 0 {
		return badInput("--partitions must be >= 0")
	}
	if opts.TxnRecords < 0 {
		return badInput("--txn-records must be positive")
	}
	if opts.TransactionalID != "" {
		if _, idempotent, err := ParseAcks(opts.Acks); err != nil || !idempotent {
			return badInput("--transactional-id needs --acks all (transactions are idempotent)")
		}
	}
	return nil
}

// benchPayload is the value every produced record carries: size letters,
// the same in every run (a fixed seed).
func benchPayload(size int) []byte {
	payload := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range payload {
		payload[i] = byte('A' + rng.IntN(26))
	}
	return payload
}

// reportEvery writes w's progress to progress every interval of clk until
// the returned stop is called (stop waits for the reporter to end).
func (w *window) reportEvery(clk clock.Clock, interval time.Duration, progress io.Writer) (stop func()) {
	done := make(chan struct{})
	var reporter sync.WaitGroup
	reporter.Add(1)
	go func() {
		defer reporter.Done()
		t := clk.NewTimer(interval)
		defer t.Stop()
		last := clk.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C():
				now := clk.Now()
				w.report(progress, now.Sub(last))
				last = now
				t.Reset(interval)
			}
		}
	}()
	return func() {
		close(done)
		reporter.Wait()
	}
}

// produceRecords produces opts.Records records of payload through cl,
// throttled to opts.Throughput, recording each acknowledgement in w; it
// stops early when ctx ends or a produce fails.
func produceRecords(ctx context.Context, cl *kgo.Client, clk clock.Clock, opts ProducerBenchOptions, payload []byte, w *window) {
	start := clk.Now()
	for i := int64(0); i < opts.Records; i++ {
		if ctx.Err() != nil {
			return
		}
		if opts.Throughput > 0 {
			// Like Kafka's ThroughputThrottler: sleep while ahead of the target.
			ahead := time.Duration(float64(i)/opts.Throughput*float64(time.Second)) - clk.Now().Sub(start)
			if ahead > time.Millisecond {
				throttle(ctx, clk, ahead)
			}
		}
		sent := clk.Now()
		cl.Produce(ctx, &kgo.Record{Value: payload}, func(_ *kgo.Record, err error) {
			w.add(len(payload), clk.Now().Sub(sent), err)
		})
		w.mu.Lock()
		failed := w.err
		w.mu.Unlock()
		if failed != nil {
			return
		}
	}
}

// producedResult is the result of a producer benchmark whose window is w
// (w.mu held).
func (w *window) producedResult(elapsed time.Duration) BenchResult {
	h := &w.latencies
	res := BenchResult{Records: h.n, Bytes: w.totalB, Elapsed: elapsed, Produced: true}
	if h.n > 0 {
		ms := func(us int64) float64 { return float64(us) / 1000 }
		res.AvgMs = float64(h.sum) / float64(h.n) / 1000
		res.MaxMs = ms(h.max)
		res.P50Ms, res.P95Ms = ms(h.percentile(0.5)), ms(h.percentile(0.95))
		res.P99Ms, res.P999Ms = ms(h.percentile(0.99)), ms(h.percentile(0.999))
	}
	return res
}

// throttle waits d on clk, or until ctx is done.
func throttle(ctx context.Context, clk clock.Clock, d time.Duration) {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

// ConsumerBenchOptions configures ConsumerBench.
type ConsumerBenchOptions struct {
	// Bootstrap is a comma-separated HOST:PORT list.
	Bootstrap string
	// Security is how the client authenticates and encrypts.
	Security Security
	// Topic to read, every partition from the earliest offset.
	Topic string
	// Records to read before stopping.
	Records int64
	// Timeout stops the run when no record arrived for this long (default 10s).
	Timeout time.Duration
	// ReportInterval between progress lines (default 5s).
	ReportInterval time.Duration
	// Clock times the run, its progress lines and the throttle (nil =
	// clock.Real).
	Clock clock.Clock
}

// ConsumerBench reads Records records from the start of every partition
// without a group (direct partition assignment) and returns the figures.
// Running out of records before Records is an error that still carries the
// figures of what was read.
func ConsumerBench(ctx context.Context, opts ConsumerBenchOptions, progress io.Writer) (BenchResult, error) {
	if opts.Topic == "" {
		return BenchResult{}, badInput("--topic is required")
	}
	if opts.Records <= 0 {
		return BenchResult{}, badInput("--records must be positive")
	}
	base, err := ClientOptions(opts.Bootstrap, opts.Security)
	if err != nil {
		return BenchResult{}, err
	}
	clk := clock.OrReal(opts.Clock)
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	interval := opts.ReportInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	meta, err := kgo.NewClient(base...)
	if err != nil {
		return BenchResult{}, fmt.Errorf("kafka: client: %w", err)
	}
	details, err := kadm.NewClient(meta).ListTopics(ctx, opts.Topic)
	meta.Close()
	if err != nil {
		return BenchResult{}, fmt.Errorf("kafka: metadata for %q: %w", opts.Topic, err)
	}
	d, ok := details[opts.Topic]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		return BenchResult{}, badInput("topic %q not found", opts.Topic)
	}
	assign := map[int32]kgo.Offset{}
	for p := range d.Partitions {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(base,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{opts.Topic: assign}),
		kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(1<<20))...)
	if err != nil {
		return BenchResult{}, fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()

	var res BenchResult
	start := clk.Now()
	last, lastN, lastB := start, int64(0), int64(0)
	for res.Records < opts.Records {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("kafka: fetch %s[%d]: %w", t, p, err)
			}
		})
		if fetches.NumRecords() == 0 && ferr != nil {
			res.Elapsed = clk.Now().Sub(start)
			if errors.Is(ferr, context.DeadlineExceeded) {
				return res, fmt.Errorf("kafka: no record for %s after %d of %d records", timeout, res.Records, opts.Records)
			}
			return res, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			res.Records++
			res.Bytes += int64(len(r.Value) + len(r.Key))
		})
		if now := clk.Now(); now.Sub(last) >= interval {
			s := now.Sub(last).Seconds()
			fmt.Fprintf(progress, "%d records received, %.1f records/sec (%.2f MB/sec).\n",
				res.Records-lastN, float64(res.Records-lastN)/s, float64(res.Bytes-lastB)/(1<<20)/s)
			last, lastN, lastB = now, res.Records, res.Bytes
		}
	}
	res.Elapsed = clk.Now().Sub(start)
	return res, nil
}
