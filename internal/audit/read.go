package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxReadRecords bounds the _audit records one ReadCounts reads.
const MaxReadRecords = 10_000_000

// Counts is what ReadCounts found: the latest count of every key.
type Counts struct {
	Counts []Count
	// Unreadable counts records that do not parse or are of a newer
	// version (skipped).
	Unreadable int
}

// ReadCounts reads the _audit topic from its start up to its end offsets
// as of the call, keeping the latest record of each key (what compaction
// keeps) and dropping keys whose latest record is a tombstone. A missing
// topic reads as no counts.
func ReadCounts(ctx context.Context, client []kgo.Opt) (Counts, error) {
	return new(Reader).Read(ctx, client)
}

// A Reader reads the _audit topic again and again, each Read fetching only
// the records appended since the last one (a scheduler checking its jobs
// every run). It starts over from the topic's start when the topic was
// recreated (another topic id, or end offsets below where it got to) or
// records it had not read yet were deleted (a log start offset past them).
// It is safe for concurrent use; Reads are serialised.
type Reader struct {
	mu sync.Mutex
	// Guarded by mu.
	id         [16]byte         // the topic's id when read (zero: unknown)
	next       map[int32]int64  // per partition, the offset read up to
	latest     map[string]Count // the latest count of each key
	unreadable int
}

func (r *Reader) reset() {
	r.id, r.next, r.latest, r.unreadable = [16]byte{}, map[int32]int64{}, map[string]Count{}, 0
}

// Read returns the latest count of every key as of the call, reading the
// records since the last Read through a client of options client.
func (r *Reader) Read(ctx context.Context, client []kgo.Opt) (Counts, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.reset()
	}
	adm, err := kgo.NewClient(client...)
	if err != nil {
		return Counts{}, fmt.Errorf("audit: client: %w", err)
	}
	defer adm.Close()
	kadmin := kadm.NewClient(adm)
	// The last stable offsets: a mirror writes its counts in transactions,
	// and only committed counts are read (read_committed).
	ends, err := kadmin.ListCommittedOffsets(ctx, Topic)
	if err != nil {
		return Counts{}, fmt.Errorf("audit: end offsets of %s: %w", Topic, err)
	}
	starts, err := kadmin.ListStartOffsets(ctx, Topic)
	if err != nil {
		return Counts{}, fmt.Errorf("audit: start offsets of %s: %w", Topic, err)
	}
	var lerr error
	check := func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = o.Err
		}
	}
	ends.Each(check)
	starts.Each(check)
	if errors.Is(lerr, kerr.UnknownTopicOrPartition) {
		r.reset()
		return Counts{}, nil
	}
	if lerr != nil {
		return Counts{}, fmt.Errorf("audit: offsets of %s: %w", Topic, lerr)
	}
	var id [16]byte
	if md, err := kadmin.Metadata(ctx, Topic); err == nil {
		if td, ok := md.Topics[Topic]; ok && td.Err == nil {
			id = td.ID
		}
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	stale := id != r.id && r.id != [16]byte{}
	for p, from := range r.next {
		end, ok := want[p]
		st, _ := starts.Lookup(Topic, p)
		stale = stale || !ok || end < from || st.Offset > from
	}
	if stale {
		r.reset()
	}
	r.id = id
	parts := map[int32]kgo.Offset{}
	for p, end := range want {
		from := r.next[p]
		if st, ok := starts.Lookup(Topic, p); ok && st.Offset > from {
			from = st.Offset // never read: the records before were deleted
		}
		if from >= end {
			delete(want, p)
			continue
		}
		parts[p] = kgo.NewOffset().At(from)
	}
	if len(want) > 0 {
		if err := r.read(ctx, client, parts, want); err != nil {
			r.reset() // part of a read: start over next time
			return Counts{}, err
		}
	}
	out := Counts{Unreadable: r.unreadable, Counts: make([]Count, 0, len(r.latest))}
	for _, c := range r.latest {
		out.Counts = append(out.Counts, c)
	}
	sortCounts(out.Counts)
	return out, nil
}

// read consumes parts up to want's end offsets into r.
func (r *Reader) read(ctx context.Context, client []kgo.Opt, parts map[int32]kgo.Offset, want map[int32]int64) error {
	ends := maps.Clone(want)
	cl, err := kgo.NewClient(append(slices.Clip(client),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return fmt.Errorf("audit: client: %w", err)
	}
	defer cl.Close()
	read := 0
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("audit: reading %s: %w", Topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("audit: reading %s: %w", Topic, ferr)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			end, ok := want[rec.Partition]
			if !ok || rec.Offset >= end {
				return
			}
			if rec.Offset == end-1 {
				delete(want, rec.Partition)
			}
			if rec.Attrs.IsControl() {
				return // a transaction's marker (the mirror tier's)
			}
			read++
			key := string(rec.Key)
			if rec.Value == nil {
				delete(r.latest, key)
				return
			}
			var c Count
			if json.Unmarshal(rec.Value, &c) != nil || c.Version < 1 || c.Version > FormatVersion || c.Key() != key {
				r.unreadable++
				return
			}
			r.latest[key] = c
		})
		if read > MaxReadRecords {
			return fmt.Errorf("audit: %s holds more than %d records; is it compacted (cleanup.policy=compact)?", Topic, MaxReadRecords)
		}
	}
	for p, end := range ends {
		r.next[p] = end
	}
	return nil
}
