package kafka

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeOptions configures Consume.
type ConsumeOptions struct {
	// Bootstrap is a comma-separated HOST:PORT list.
	Bootstrap string
	// Topic to read.
	Topic string
	// Partitions to read; empty reads every partition of the topic.
	Partitions []int32
	// Group consumes as a member of this consumer group (the broker assigns
	// partitions, committed offsets are the start and are committed on the
	// way); From then only applies to partitions without a commit. Group
	// and Partitions exclude each other.
	Group string
	// From is earliest, latest, or an absolute offset N.
	From string
	// Max stops after this many records; 0 means no limit.
	Max int64
	// Format is a --format value (see ParseFormat).
	Format string
	// ExitAtEnd stops once every partition reached the end offset it had
	// when Consume started.
	ExitAtEnd bool
	// Timeout stops when no record arrived for this long; 0 waits forever.
	Timeout time.Duration
	// Progress receives a progress line every ProgressInterval (nil or a
	// zero interval: none). It must not be the records' output.
	Progress         io.Writer
	ProgressInterval time.Duration
}

// ParseFrom maps earliest|latest|N to a franz-go offset.
func ParseFrom(s string) (kgo.Offset, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "earliest", "beginning", "start":
		return kgo.NewOffset().AtStart(), nil
	case "latest", "end":
		return kgo.NewOffset().AtEnd(), nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return kgo.Offset{}, badInput("--from %q is not earliest, latest or a non-negative offset", s)
	}
	return kgo.NewOffset().At(n), nil
}

// Consume reads records and writes them to out through the format. It
// returns how many records it wrote.
func Consume(ctx context.Context, opts ConsumeOptions, out io.Writer) (int64, error) {
	if opts.Topic == "" {
		return 0, badInput("--topic is required")
	}
	if opts.Max < 0 {
		return 0, badInput("--max must be >= 0, got %d", opts.Max)
	}
	seeds, err := SplitBootstrap(opts.Bootstrap)
	if err != nil {
		return 0, err
	}
	from, err := ParseFrom(opts.From)
	if err != nil {
		return 0, err
	}
	format, err := ParseFormat(opts.Format)
	if err != nil {
		return 0, err
	}
	if opts.Group != "" && len(opts.Partitions) > 0 {
		return 0, badInput("--group and --partition exclude each other")
	}

	meta, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return 0, fmt.Errorf("kafka: client: %w", err)
	}
	adm := kadm.NewClient(meta)
	partitions, remaining, err := plan(ctx, adm, opts, from)
	meta.Close()
	if err != nil {
		return 0, err
	}
	if opts.ExitAtEnd && len(remaining) == 0 {
		return 0, nil
	}

	kopts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(500 * time.Millisecond)}
	if opts.Group != "" {
		kopts = append(kopts, kgo.ConsumerGroup(opts.Group), kgo.ConsumeTopics(opts.Topic),
			kgo.ConsumeResetOffset(from), kgo.DisableAutoCommit())
	} else {
		assign := make(map[int32]kgo.Offset, len(partitions))
		for _, p := range partitions {
			assign[p] = from
		}
		kopts = append(kopts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{opts.Topic: assign}),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return 0, fmt.Errorf("kafka: client: %w", err)
	}
	// printed is, per partition, the offset after the last record written
	// out: what a group commits (a poll may return more than --max allows).
	printed := map[int32]kgo.EpochOffset{}
	commit := func() {
		if opts.Group == "" || len(printed) == 0 {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{opts.Topic: printed}, nil)
	}
	defer func() {
		commit()
		cl.Close()
	}()

	progress := StartProgress(opts.Progress, "consumed", opts.ProgressInterval)
	defer progress.Stop()
	bw := bufio.NewWriterSize(out, 64<<10)
	defer bw.Flush()
	var (
		n   int64
		buf []byte
	)
	for {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if opts.Timeout > 0 {
			pollCtx, cancel = context.WithTimeout(ctx, opts.Timeout)
		}
		fetches := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		if fetches.IsClientClosed() {
			return n, nil
		}
		idle := false
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				idle = true
				return
			}
			if ferr == nil {
				ferr = fmt.Errorf("kafka: fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return n, ferr
		}
		stop := false
		fetches.EachRecord(func(r *kgo.Record) {
			if stop {
				return
			}
			buf = format.Format(buf[:0], r)
			if err := writeAll(bw, buf); err != nil && ferr == nil {
				ferr = fmt.Errorf("kafka: write output: %w", err)
			}
			n++
			progress.Add(1, int64(len(r.Key)+len(r.Value)))
			printed[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if opts.Max > 0 && n >= opts.Max {
				stop = true
			}
		})
		if ferr != nil {
			return n, ferr
		}
		if stop || (opts.ExitAtEnd && len(remaining) == 0) {
			return n, bw.Flush()
		}
		if idle && fetches.NumRecords() == 0 {
			return n, bw.Flush()
		}
		if err := bw.Flush(); err != nil {
			return n, fmt.Errorf("kafka: write output: %w", err)
		}
		commit()
	}
}

// plan resolves the partitions to read and, for ExitAtEnd, each partition's
// end offset that still lies ahead of the start position.
func plan(ctx context.Context, adm *kadm.Client, opts ConsumeOptions, from kgo.Offset) ([]int32, map[int32]int64, error) {
	details, err := adm.ListTopics(ctx, opts.Topic)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: metadata for %q: %w", opts.Topic, err)
	}
	d, ok := details[opts.Topic]
	if !ok || d.Err != nil {
		reason := "not found"
		if ok {
			reason = d.Err.Error()
		}
		return nil, nil, badInput("topic %q: %s", opts.Topic, reason)
	}
	partitions := opts.Partitions
	if len(partitions) == 0 {
		for _, p := range d.Partitions.Sorted() {
			partitions = append(partitions, p.Partition)
		}
	}
	for _, p := range partitions {
		if _, ok := d.Partitions[p]; !ok {
			return nil, nil, badInput("topic %q has no partition %d (it has %d)", opts.Topic, p, len(d.Partitions))
		}
	}
	remaining := map[int32]int64{}
	if !opts.ExitAtEnd {
		return partitions, remaining, nil
	}
	ends, err := adm.ListEndOffsets(ctx, opts.Topic)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: end offsets of %q: %w", opts.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, opts.Topic)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: start offsets of %q: %w", opts.Topic, err)
	}
	var committed kadm.OffsetResponses
	if opts.Group != "" {
		committed, err = adm.FetchOffsets(ctx, opts.Group)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka: committed offsets of group %q: %w", opts.Group, err)
		}
	}
	for _, p := range partitions {
		end, ok := ends.Lookup(opts.Topic, p)
		if !ok || end.Err != nil {
			return nil, nil, fmt.Errorf("kafka: end offset of %s[%d] unknown", opts.Topic, p)
		}
		start := end.Offset // latest
		if at := from.EpochOffset().Offset; at >= 0 {
			start = at
		} else if s, ok := starts.Lookup(opts.Topic, p); ok && at == -2 { // earliest
			start = s.Offset
		}
		if c, ok := committed.Lookup(opts.Topic, p); ok && c.Err == nil && c.At >= 0 {
			start = c.At
		}
		if start < end.Offset {
			remaining[p] = end.Offset
		}
	}
	return partitions, remaining, nil
}
