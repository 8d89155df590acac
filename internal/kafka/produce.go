package kafka

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceOptions configures Produce.
type ProduceOptions struct {
	ProducerConfig
	// Topic to write to.
	Topic string
	// KeySeparator splits each line at its first occurrence into key and
	// value; empty means every line is a value without a key.
	KeySeparator string
	// Partition sends every record to this partition; -1 lets the
	// partitioner choose (by key hash, sticky for key-less records).
	Partition int32
	// MaxLineBytes bounds one input line (default 1 MiB).
	MaxLineBytes int
	// Progress receives a progress line every ProgressInterval (nil or a
	// zero interval: none).
	Progress         io.Writer
	ProgressInterval time.Duration
}

// Produce reads newline-separated records from in and writes them to the
// topic, waiting for every acknowledgement. It returns how many records were
// acknowledged; the first produce error stops reading.
func Produce(ctx context.Context, opts ProduceOptions, in io.Reader) (int64, error) {
	if opts.Topic == "" {
		return 0, badInput("--topic is required")
	}
	if opts.Partition < -1 {
		return 0, badInput("partition must be >= 0 (or -1 for any), got %d", opts.Partition)
	}
	opts.ManualPartition = opts.Partition >= 0
	kopts, err := opts.options()
	if err != nil {
		return 0, err
	}
	kopts = append(kopts, kgo.DefaultProduceTopic(opts.Topic), kgo.AllowAutoTopicCreation(), kgo.UnknownTopicRetries(3))
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return 0, fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()

	maxLine := opts.MaxLineBytes
	if maxLine <= 0 {
		maxLine = 1 << 20
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	sc.Split(scanLF)
	sep := []byte(opts.KeySeparator)

	progress := StartProgress(opts.Progress, "produced", opts.ProgressInterval)
	defer progress.Stop()
	var (
		mu       sync.Mutex
		firstErr error
		acked    int64
	)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return firstErr != nil }
	for sc.Scan() && !failed() {
		line := bytes.Clone(sc.Bytes())
		r := &kgo.Record{Value: line, Partition: opts.Partition}
		if len(sep) > 0 {
			if k, v, ok := bytes.Cut(line, sep); ok {
				r.Key, r.Value = k, v
			}
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("kafka: produce to %s[%d]: %w", r.Topic, r.Partition, err)
				}
				return
			}
			acked++
			progress.Add(1, int64(len(r.Key)+len(r.Value)))
		})
	}
	scanErr := sc.Err()
	if errors.Is(scanErr, bufio.ErrTooLong) {
		scanErr = badInput("an input line is longer than %d bytes", maxLine)
	}
	flushCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	flushErr := cl.Flush(flushCtx)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case firstErr != nil:
		return acked, firstErr
	case scanErr != nil:
		return acked, fmt.Errorf("kafka: read input: %w", scanErr)
	case flushErr != nil:
		return acked, fmt.Errorf("kafka: flush: %w", flushErr)
	}
	return acked, nil
}

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// scanLF splits at '\n' only, keeping a '\r' before it: values stay byte-exact.
func scanLF(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
