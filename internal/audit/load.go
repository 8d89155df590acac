package audit

import (
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
)

// Skip is a range of offsets a job committed without loading them: records
// deleted by retention before they were loaded (on_offset_out_of_range:
// skip commits the range as a manifest with no files, its count in
// writers.AuditCounts.Lost).
type Skip struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
}

// Records is the number of offsets of the range.
func (s Skip) Records() int64 { return s.End - s.Start }

// Load is the load tier of one job, read from its committed manifests.
type Load struct {
	// Topics are the job's topics: the load tier owes each of them every
	// record, counted or not.
	Topics []string
	Counts []Count
	Skips  []Skip
	// Uncounted counts the records of committed manifests written before
	// the audit (no counts in them).
	Uncounted int64
}

// LoadCounts reads the load tier of the job named origin from the
// manifests committed on store, for topics (each topic's partitions are
// those with commits). A torn manifest is an error (run the loader, whose
// recovery sets it aside, and audit again).
func LoadCounts(store *writers.Store, origin string, topics []string) (Load, error) {
	return new(LoadReader).Read(store, origin, topics)
}

// A LoadReader reads a job's load tier again and again (the scheduler's
// checks), each Read reading only the manifests committed since the last
// one, from a cursor per partition (writers.Store.CommitsFrom, as the
// completeness check counts its records). It is safe for concurrent use.
type LoadReader struct {
	mu sync.Mutex
	// Guarded by mu.
	origin  string
	topics  []string
	cursors map[string]int64 // topic/partition: the end of the last manifest read
	cells   map[cellKey]*Count
	load    Load // Skips and Uncounted so far
}

// Read returns the load tier of the job named origin on store for topics,
// as LoadCounts, reading only what is new since the last Read (all of it
// when origin or topics changed, or the last Read failed).
func (r *LoadReader) Read(store *writers.Store, origin string, topics []string) (Load, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cursors == nil || r.origin != origin || !slices.Equal(r.topics, topics) {
		r.origin, r.topics = origin, slices.Clone(topics)
		r.cursors, r.cells, r.load = map[string]int64{}, map[cellKey]*Count{}, Load{}
	}
	if err := r.read(store); err != nil {
		r.cursors = nil // start over next time: part of this read may be in
		return Load{}, err
	}
	out := Load{Topics: slices.Clone(topics), Skips: slices.Clone(r.load.Skips), Uncounted: r.load.Uncounted}
	for _, c := range r.cells {
		out.Counts = append(out.Counts, *c)
	}
	sortCounts(out.Counts)
	sort.Slice(out.Skips, func(i, j int) bool {
		a, b := out.Skips[i], out.Skips[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Start < b.Start
	})
	return out, nil
}

func (r *LoadReader) read(store *writers.Store) error {
	for _, topic := range r.topics {
		names, err := vfs.ListNames(store.FS(), path.Join(writers.SluiceDir, "commits", topic))
		if errors.Is(err, vfs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("audit: listing the commits of %s: %w", topic, err)
		}
		for _, name := range names {
			p, err := strconv.ParseInt(name, 10, 32)
			if err != nil || p < 0 {
				continue
			}
			key := topic + "/" + name
			from, ok := r.cursors[key]
			if !ok {
				from = math.MinInt64
			}
			ms, err := store.CommitsFrom(topic, int32(p), from)
			if err != nil {
				return fmt.Errorf("audit: commits of %s/%d: %w", topic, p, err)
			}
			for _, m := range ms {
				addManifest(&r.load, r.cells, r.origin, m)
				r.cursors[key] = m.End
			}
		}
	}
	return nil
}

func addManifest(out *Load, cells map[cellKey]*Count, origin string, m *writers.Manifest) {
	if m.Audit == nil {
		out.Uncounted += m.Records
		return
	}
	if m.Audit.Lost > 0 {
		out.Skips = append(out.Skips, Skip{Topic: m.Topic, Partition: m.Partition, Start: m.Start, End: m.Start + m.Audit.Lost})
	}
	for _, w := range m.Audit.Windows {
		k := cellKey{m.Topic, w.Start}
		c := cells[k]
		if c == nil {
			c = &Count{Version: FormatVersion, Tier: TierLoad, Topic: m.Topic, WindowStart: w.Start,
				WindowMs: m.Audit.WindowMs, Origin: origin}
			cells[k] = c
		}
		c.Messages += w.Loaded
		c.Bytes += w.Bytes
		c.Filtered += w.Filtered
		c.DeadLettered += w.DeadLettered
		c.Malformed += w.Malformed
		if m.Committed.After(c.Updated) {
			c.Updated = m.Committed
		}
	}
}
