package writers

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/internal/mutate"
	"github.com/sluicehq/sluice/internal/vfs"
)

// ErrNotChained reports a split that does not continue its partition's
// chain of commits: its start is neither the partition's origin nor the end
// of a committed manifest (a stale or diverging planner). Nothing was
// committed; plan again from NextStart.
var ErrNotChained = errors.New("writers: split does not continue the partition's commits")

// starts returns the starts of a partition's manifests, ascending, from one
// listing of its commits directory (names only; nothing is read).
func (s *Store) starts(topic string, partition int32) ([]int64, error) {
	ents, err := s.fs.List(partDir(commitsDir, topic, partition))
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(ents))
	for _, e := range ents {
		if e.IsDir || !strings.HasSuffix(e.Name, ".json") {
			continue
		}
		if st, ok := parseStart(e.Name); ok {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// readOrigin reads the partition's origin record (ErrNotExist if none).
func (s *Store) readOrigin(topic string, partition int32) (*Origin, error) {
	return readRecord(s, OriginPath(topic, partition), decodeOrigin)
}

// origin returns the partition's origin, creating it exclusively at start
// when there is none. A partition with manifests but no origin record
// (written before origins existed) gets its smallest manifest start.
func (s *Store) origin(topic string, partition int32, start int64) (*Origin, error) {
	p := OriginPath(topic, partition)
	o, err := await(s, func() (*Origin, error) { return s.readOrigin(topic, partition) })
	if !errors.Is(err, vfs.ErrNotExist) {
		return o, err
	}
	starts, err := s.starts(topic, partition)
	if err != nil {
		return nil, err
	}
	if len(starts) > 0 {
		start = starts[0]
	}
	o = &Origin{Topic: topic, Partition: partition, Start: start, Created: s.opts.Clock.Now().UTC()}
	data, err := o.encode()
	if err != nil {
		return nil, err
	}
	if err := s.fs.MkdirAll(partDir(commitsDir, topic, partition)); err != nil {
		return nil, err
	}
	werr := s.fs.WriteExclusive(p, data)
	if werr == nil {
		s.log.Info("origin fixed", "topic", topic, "partition", partition, "start", start)
		return o, nil
	}
	// Another first run fixed it (or our write failed): read what is there.
	o, err = await(s, func() (*Origin, error) { return s.readOrigin(topic, partition) })
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, fmt.Errorf("writers: fixing the origin of %s/%d: %w", topic, partition, werr)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: fixing the origin of %s/%d: %w; reading it back: %w", ErrCommitUnknown, topic, partition, werr, err)
	}
	return o, nil
}

// checkChain returns nil when split may be committed: its start is the
// partition's origin (fixing the origin if it is the first commit) or the end
// of the committed manifest just before it. It reads the origin and at most
// one manifest.
func (s *Store) checkChain(split Split) error {
	o, err := s.origin(split.Topic, split.Partition, split.Start)
	if err != nil {
		return err
	}
	if mutate.Enabled(mutate.Chain) { // test-only: any start continues the chain
		return nil
	}
	if split.Start == o.Start {
		return nil
	}
	if split.Start < o.Start {
		return fmt.Errorf("%w: %s starts before the partition's origin %d", ErrNotChained, split, o.Start)
	}
	starts, err := s.starts(split.Topic, split.Partition)
	if err != nil {
		return err
	}
	// The manifests tile [origin, newest end), so the only one that can end
	// at split.Start is the one with the greatest start below it.
	i := sort.Search(len(starts), func(i int) bool { return starts[i] >= split.Start }) - 1
	if i < 0 {
		return fmt.Errorf("%w: %s: no commit ends at %d (origin %d, nothing committed yet)", ErrNotChained, split, split.Start, o.Start)
	}
	prev, err := s.awaitManifest(ManifestPath(split.Topic, split.Partition, starts[i]))
	if err != nil {
		return fmt.Errorf("writers: checking the commit before %s: %w", split, err)
	}
	if prev.End != split.Start {
		return fmt.Errorf("%w: %s: the commit before it is [%d, %d)", ErrNotChained, split, prev.Start, prev.End)
	}
	return nil
}

// NextStart returns where the next split of a partition starts: the end of
// its newest manifest; else its origin (fixed by a first run that has not
// committed yet, or left by a withdrawal of everything); else def. It lists
// the commits directory once and reads one record.
func (s *Store) NextStart(topic string, partition int32, def int64) (int64, error) {
	starts, err := s.starts(topic, partition)
	if err != nil {
		return 0, err
	}
	if len(starts) > 0 {
		m, err := s.awaitManifest(ManifestPath(topic, partition, starts[len(starts)-1]))
		if err != nil {
			return 0, err
		}
		return m.End, nil
	}
	o, err := await(s, func() (*Origin, error) { return s.readOrigin(topic, partition) })
	switch {
	case err == nil:
		return o.Start, nil
	case errors.Is(err, vfs.ErrNotExist):
		return def, nil
	default:
		return 0, err
	}
}

// CheckTiling checks the chain invariant on a partition's manifests (as
// Commits returns them, ordered by start): they tile [origin, newest end)
// with no overlap and no gap, each non-empty. It returns the end of the
// tiled range (origin when there are none).
func CheckTiling(origin int64, ms []*Manifest) (int64, error) {
	next := origin
	for _, m := range ms {
		if m.Start != next {
			kind := "a gap"
			if m.Start < next {
				kind = "an overlap"
			}
			return next, fmt.Errorf("writers: %s/%d: %s: commit [%d, %d) follows the chain's end %d", m.Topic, m.Partition, kind, m.Start, m.End, next)
		}
		if m.End <= m.Start {
			return next, fmt.Errorf("writers: %s/%d: empty commit [%d, %d)", m.Topic, m.Partition, m.Start, m.End)
		}
		next = m.End
	}
	return next, nil
}
