package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
	adm, err := kgo.NewClient(client...)
	if err != nil {
		return Counts{}, fmt.Errorf("audit: client: %w", err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, Topic)
	if err != nil {
		return Counts{}, fmt.Errorf("audit: end offsets of %s: %w", Topic, err)
	}
	want := map[int32]int64{}
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = o.Err
			return
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if errors.Is(lerr, kerr.UnknownTopicOrPartition) {
		return Counts{}, nil
	}
	if lerr != nil {
		return Counts{}, fmt.Errorf("audit: end offsets of %s: %w", Topic, lerr)
	}
	if len(want) == 0 {
		return Counts{}, nil
	}
	parts := map[int32]kgo.Offset{}
	for p := range want {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(slices.Clip(client),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: parts}))...)
	if err != nil {
		return Counts{}, fmt.Errorf("audit: client: %w", err)
	}
	defer cl.Close()
	latest := map[string]*Count{}
	var out Counts
	read := 0
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Counts{}, fmt.Errorf("audit: reading %s: %w", Topic, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return Counts{}, fmt.Errorf("audit: reading %s: %w", Topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
			read++
			key := string(r.Key)
			if r.Value == nil {
				delete(latest, key)
				return
			}
			var c Count
			if json.Unmarshal(r.Value, &c) != nil || c.Version < 1 || c.Version > FormatVersion || c.Key() != key {
				out.Unreadable++
				return
			}
			latest[key] = &c
		})
		if read > MaxReadRecords {
			return Counts{}, fmt.Errorf("audit: %s holds more than %d records; is it compacted (cleanup.policy=compact)?", Topic, MaxReadRecords)
		}
	}
	for _, c := range latest {
		out.Counts = append(out.Counts, *c)
	}
	sortCounts(out.Counts)
	return out, nil
}
