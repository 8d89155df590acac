package inputformat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/clock"
)

// ClientOptions are the franz-go options a Reader's client needs: Fetch is
// capped at version 12 (13 and later address topics by ID, which the
// Reader does not track).
func ClientOptions() []kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.Fetch.Int16(), 12)
	return []kgo.Opt{kgo.MaxVersions(v)}
}

// ReaderOptions tune a Reader; zero values are the defaults.
type ReaderOptions struct {
	// ReadCommitted skips the records of aborted transactions (control
	// records are always skipped).
	ReadCommitted bool
	// MaxWait is how long the broker may hold a fetch (default 500ms).
	MaxWait time.Duration
	// PartitionMaxBytes is the first per-partition fetch size (default 1
	// MiB); it doubles, up to 64 MiB, when a batch does not fit. A fetch
	// is held while its records are written, about 7 times its size once
	// decompressed and parsed (zstd page views): larger fetches cost memory
	// and gain nothing measurable on loopback.
	PartitionMaxBytes int32
	// RetryFor bounds how long retriable errors (leader moves, a broker
	// restarting) are retried with backoff (default 60s).
	RetryFor time.Duration
	// Clock times RetryFor and the backoff between retries (nil =
	// clock.Real).
	Clock clock.Clock
}

// Reader reads the records of one split in offset order. It is not safe
// for concurrent use.
type Reader struct {
	cl     *kgo.Client
	split  Split
	opts   ReaderOptions
	pos    int64 // every offset below pos is accounted for
	leader int32
	decomp kgo.Decompressor
	// Bytes counts the record-batch bytes fetched (compressed, as on the wire).
	bytes int64
}

// NewReader returns a reader of split on a client made with ClientOptions.
func NewReader(cl *kgo.Client, split Split, opts ReaderOptions) (*Reader, error) {
	if err := split.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 500 * time.Millisecond
	}
	if opts.PartitionMaxBytes <= 0 {
		opts.PartitionMaxBytes = 1 << 20
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = 60 * time.Second
	}
	opts.Clock = clock.OrReal(opts.Clock)
	return &Reader{cl: cl, split: split, opts: opts, pos: split.Start, leader: -1, decomp: kgo.DefaultDecompressor()}, nil
}

// Reached returns the offset up to which the split has been read: every
// offset in [Start, Reached()) was returned, or is a control record, an
// aborted record or a compacted gap. It equals End once Next returned
// done.
func (r *Reader) Reached() int64 { return r.pos }

// BytesFetched returns the record-batch bytes received so far.
func (r *Reader) BytesFetched() int64 { return r.bytes }

// Next returns the next records of the split (possibly none, with done
// false, when a fetch held only skipped offsets). done is true once
// Reached() == End; then records is empty.
func (r *Reader) Next(ctx context.Context) (records []*kgo.Record, done bool, err error) {
	backoff := 50 * time.Millisecond
	var retryUntil time.Time
	for {
		if r.pos >= r.split.End {
			return nil, true, nil
		}
		recs, progressed, err := r.fetchOnce(ctx)
		if err == nil {
			if progressed {
				return recs, false, nil
			}
			continue
		}
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		if !retriable(err) {
			return nil, false, err
		}
		if retryUntil.IsZero() {
			retryUntil = r.opts.Clock.Now().Add(r.opts.RetryFor)
		} else if r.opts.Clock.Now().After(retryUntil) {
			return nil, false, fmt.Errorf("inputformat: reading %s at offset %d: gave up after %s: %w", r.split, r.pos, r.opts.RetryFor, err)
		}
		r.leader = -1
		t := r.opts.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false, ctx.Err()
		case <-t.C():
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

type retriableError struct{ err error }

func (e retriableError) Error() string { return e.err.Error() }
func (e retriableError) Unwrap() error { return e.err }

func retriable(err error) bool {
	var re retriableError
	return errors.As(err, &re) || kerr.IsRetriable(err)
}

var errCorrupt = errors.New("inputformat: corrupt fetch")

func (r *Reader) findLeader(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(r.split.Topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return retriableError{err}
	}
	for _, mt := range resp.Topics {
		if mt.Topic == nil || *mt.Topic != r.split.Topic {
			continue
		}
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return fmt.Errorf("inputformat: metadata of %s: %w", r.split.Topic, err)
		}
		for _, p := range mt.Partitions {
			if p.Partition != r.split.Partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("inputformat: metadata of %s/%d: %w", r.split.Topic, p.Partition, err)
			}
			if p.Leader < 0 {
				return kerr.LeaderNotAvailable
			}
			r.leader = p.Leader
			return nil
		}
		return fmt.Errorf("%w: %s has no partition %d", ErrNoTopic, r.split.Topic, r.split.Partition)
	}
	return kerr.UnknownTopicOrPartition
}

// fetchOnce sends one Fetch for the split's partition at pos. progressed
// reports whether pos moved.
func (r *Reader) fetchOnce(ctx context.Context) ([]*kgo.Record, bool, error) {
	if r.leader < 0 {
		if err := r.findLeader(ctx); err != nil {
			return nil, false, err
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(r.opts.MaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 64 << 20
	if r.opts.ReadCommitted {
		req.IsolationLevel = 1
	}
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = r.split.Topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.split.Partition
	rp.FetchOffset = r.pos
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = r.opts.PartitionMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	resp, err := req.RequestWith(ctx, r.cl.Broker(int(r.leader)))
	if err != nil {
		return nil, false, retriableError{err}
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, false, err
	}
	var part *kmsg.FetchResponseTopicPartition
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != r.split.Topic {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == r.split.Partition {
				part = &t.Partitions[j]
			}
		}
	}
	if part == nil {
		return nil, false, retriableError{fmt.Errorf("inputformat: fetch answer for %s holds no partition %d", r.split.Topic, r.split.Partition)}
	}
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			if r.pos < part.LogStartOffset || (part.LogStartOffset < 0 && r.pos < r.split.End) {
				return nil, false, fmt.Errorf("%w: %s: offset %d is below the log start offset %d (deleted before it was loaded); plan again",
					ErrOutOfRange, r.split, r.pos, part.LogStartOffset)
			}
			return nil, false, fmt.Errorf("%w: %s: offset %d is beyond the log end (high watermark %d)", ErrTruncated, r.split, r.pos, part.HighWatermark)
		}
		return nil, false, err
	}
	r.bytes += int64(len(part.RecordBatches))
	isolation := kgo.ReadUncommitted()
	if r.opts.ReadCommitted {
		isolation = kgo.ReadCommitted()
	}
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: r.pos, IsolationLevel: isolation, Topic: r.split.Topic, Partition: r.split.Partition,
	}, part, r.decomp, nil)
	if fp.Err != nil && len(fp.Records) == 0 && next <= r.pos {
		return nil, false, fmt.Errorf("%w: %s at offset %d: %v", errCorrupt, r.split, r.pos, fp.Err)
	}
	out := fp.Records[:0]
	for _, rec := range fp.Records {
		if rec.Offset >= r.pos && rec.Offset < r.split.End {
			out = append(out, rec)
		}
	}
	if next > r.pos {
		r.pos = min(next, r.split.End)
		return out, true, nil
	}
	// No progress: either nothing is there yet (the log ends below our end:
	// truncated), or a batch was larger than the partition byte limit.
	limit := part.HighWatermark
	if r.opts.ReadCommitted && part.LastStableOffset >= 0 {
		limit = part.LastStableOffset
	}
	if limit <= r.pos {
		if part.HighWatermark <= r.pos {
			return nil, false, fmt.Errorf("%w: %s: the log ends at %d, below offset %d which the plan saw", ErrTruncated, r.split, part.HighWatermark, r.pos)
		}
		// An open transaction below our end (read_committed): wait for it.
		return nil, false, retriableError{fmt.Errorf("inputformat: %s: waiting for the last stable offset (%d) to pass %d", r.split, limit, r.pos)}
	}
	if len(part.RecordBatches) > 0 && r.opts.PartitionMaxBytes < 64<<20 {
		r.opts.PartitionMaxBytes *= 2
		return nil, false, nil
	}
	return nil, false, retriableError{fmt.Errorf("inputformat: %s: no progress at offset %d (high watermark %d)", r.split, r.pos, part.HighWatermark)}
}
