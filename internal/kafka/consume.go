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
	// Security is how the client authenticates and encrypts.
	Security Security
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
	// Isolation is read_uncommitted (the default, as Kafka's consumers) or
	// read_committed: only committed transactions' records, and nothing
	// past the partition's last stable offset (ExitAtEnd stops there).
	Isolation string
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

// ParseIsolation maps read_uncommitted|read_committed to franz-go's level.
func ParseIsolation(s string) (kgo.IsolationLevel, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "read_uncommitted", "uncommitted":
		return kgo.ReadUncommitted(), nil
	case "read_committed", "committed":
		return kgo.ReadCommitted(), nil
	}
	return kgo.ReadUncommitted(), badInput("--isolation %q is not read_uncommitted or read_committed", s)
}

func readCommitted(s string) bool {
	l, _ := ParseIsolation(s)
	return l == kgo.ReadCommitted()
}

// Consume reads records and writes them to out through the format. It
// returns how many records it wrote.
func Consume(ctx context.Context, opts ConsumeOptions, out io.Writer) (int64, error) {
	base, from, format, err := parseConsume(opts)
	if err != nil {
		return 0, err
	}
	partitions, remaining, err := planConsume(ctx, base, opts, from)
	if err != nil {
		return 0, err
	}
	if opts.ExitAtEnd && len(remaining) == 0 {
		return 0, nil
	}
	cl, err := kgo.NewClient(consumeClientOptions(opts, base, from, partitions)...)
	if err != nil {
		return 0, fmt.Errorf("kafka: client: %w", err)
	}
	c := &consumer{opts: opts, cl: cl, format: format, remaining: remaining, printed: map[int32]kgo.EpochOffset{},
		out: bufio.NewWriterSize(out, 64<<10)}
	defer func() {
		c.flush() // what an error return left buffered
		c.commit()
		cl.Close()
	}()
	c.progress = StartProgress(opts.Progress, "consumed", opts.ProgressInterval)
	defer c.progress.Stop()
	return c.run(ctx)
}

// parseConsume checks the options and parses the bootstrap list, --from
// and --format.
func parseConsume(opts ConsumeOptions) (base []kgo.Opt, from kgo.Offset, format Formatter, err error) {
	if opts.Topic == "" {
		return nil, from, nil, badInput("--topic is required")
	}
	if opts.Max < 0 {
		return nil, from, nil, badInput("--max must be >= 0, got %d", opts.Max)
	}
	if base, err = ClientOptions(opts.Bootstrap, opts.Security); err != nil {
		return nil, from, nil, err
	}
	if from, err = ParseFrom(opts.From); err != nil {
		return nil, from, nil, err
	}
	if format, err = ParseFormat(opts.Format); err != nil {
		return nil, from, nil, err
	}
	if opts.Group != "" && len(opts.Partitions) > 0 {
		return nil, from, nil, badInput("--group and --partition exclude each other")
	}
	if _, err = ParseIsolation(opts.Isolation); err != nil {
		return nil, from, nil, err
	}
	return base, from, format, nil
}

// planConsume runs plan on a metadata client of its own.
func planConsume(ctx context.Context, base []kgo.Opt, opts ConsumeOptions, from kgo.Offset) ([]int32, map[int32]int64, error) {
	meta, err := kgo.NewClient(base...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: client: %w", err)
	}
	defer meta.Close()
	return plan(ctx, kadm.NewClient(meta), opts, from)
}

// consumeClientOptions are the options of the consuming client: a group
// member with manual commits, or direct assignment of partitions. Control
// records (transaction markers) are kept so the consumer sees its position
// move past them (write skips them): a partition whose last entry is a
// marker ends for ExitAtEnd.
func consumeClientOptions(opts ConsumeOptions, base []kgo.Opt, from kgo.Offset, partitions []int32) []kgo.Opt {
	level, _ := ParseIsolation(opts.Isolation)
	kopts := append(append([]kgo.Opt{}, base...), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchIsolationLevel(level), kgo.KeepControlRecords())
	if opts.Group != "" {
		return append(kopts, kgo.ConsumerGroup(opts.Group), kgo.ConsumeTopics(opts.Topic),
			kgo.ConsumeResetOffset(from), kgo.DisableAutoCommit())
	}
	assign := make(map[int32]kgo.Offset, len(partitions))
	for _, p := range partitions {
		assign[p] = from
	}
	return append(kopts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{opts.Topic: assign}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

// consumer is one Consume call's state: it polls, writes records out and
// commits what it wrote. Used by one goroutine.
type consumer struct {
	opts     ConsumeOptions
	cl       *kgo.Client
	format   Formatter
	out      *bufio.Writer
	progress *Progress
	// remaining is, for ExitAtEnd, each partition's end offset not reached yet.
	remaining map[int32]int64
	// printed is, per partition, the offset after the last record written
	// out: what a group commits (a poll may return more than --max allows).
	printed map[int32]kgo.EpochOffset
	// failed is set once a write or flush of the output failed: what was
	// buffered may be lost, so nothing more is committed (the group gets
	// those records again).
	failed bool
	n      int64 // records written
	buf    []byte
}

// commit commits the printed offsets when consuming in a group and no
// write of the output failed.
func (c *consumer) commit() {
	if c.opts.Group == "" || len(c.printed) == 0 || c.failed {
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.cl.CommitOffsetsSync(cctx, map[string]map[int32]kgo.EpochOffset{c.opts.Topic: c.printed}, nil)
}

// run polls until --max, the end (ExitAtEnd), an idle --timeout, the
// client's close or an error.
func (c *consumer) run(ctx context.Context) (int64, error) {
	for {
		fetches := c.poll(ctx)
		if ctx.Err() != nil {
			return c.n, ctx.Err()
		}
		if fetches.IsClientClosed() {
			return c.n, nil
		}
		idle, err := fetchErrors(fetches)
		if err != nil {
			return c.n, err
		}
		stop, err := c.write(fetches)
		if err != nil {
			return c.n, err
		}
		if stop || (c.opts.ExitAtEnd && len(c.remaining) == 0) {
			return c.n, c.flush()
		}
		if idle && fetches.NumRecords() == 0 {
			return c.n, c.flush()
		}
		if err := c.flush(); err != nil {
			return c.n, err
		}
		c.commit()
	}
}

// poll waits for the next fetches, at most --timeout when set.
func (c *consumer) poll(ctx context.Context) kgo.Fetches {
	if c.opts.Timeout <= 0 {
		return c.cl.PollFetches(ctx)
	}
	pollCtx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return c.cl.PollFetches(pollCtx)
}

// fetchErrors returns the first fetch error; idle reports a poll that ended
// by its deadline or cancellation.
func fetchErrors(fetches kgo.Fetches) (idle bool, err error) {
	fetches.EachError(func(t string, p int32, ferr error) {
		if errors.Is(ferr, context.DeadlineExceeded) || errors.Is(ferr, context.Canceled) {
			idle = true
			return
		}
		if err == nil {
			err = fmt.Errorf("kafka: fetch %s[%d]: %w", t, p, ferr)
		}
	})
	return idle, err
}

// flush writes what is buffered to the output; a failure stops commits.
func (c *consumer) flush() error {
	if err := c.out.Flush(); err != nil {
		c.failed = true
		return fmt.Errorf("kafka: write output: %w", err)
	}
	return nil
}

// write formats the fetched records out up to --max, stopping at the first
// failed write; stop reports that --max was reached.
func (c *consumer) write(fetches kgo.Fetches) (stop bool, err error) {
	fetches.EachRecord(func(r *kgo.Record) {
		if stop || err != nil {
			return
		}
		if r.Attrs.IsControl() {
			c.printed[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			if end, ok := c.remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(c.remaining, r.Partition)
			}
			return
		}
		c.buf = c.format.Format(c.buf[:0], r)
		if werr := writeAll(c.out, c.buf); werr != nil {
			c.failed = true
			err = fmt.Errorf("kafka: write output: %w", werr)
			return
		}
		c.n++
		c.progress.Add(1, int64(len(r.Key)+len(r.Value)))
		c.printed[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		if end, ok := c.remaining[r.Partition]; ok && r.Offset+1 >= end {
			delete(c.remaining, r.Partition)
		}
		if c.opts.Max > 0 && c.n >= c.opts.Max {
			stop = true
		}
	})
	return stop, err
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
	list := adm.ListEndOffsets
	if readCommitted(opts.Isolation) {
		list = adm.ListCommittedOffsets // the last stable offsets
	}
	ends, err := list(ctx, opts.Topic)
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
