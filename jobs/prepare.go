package jobs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
)

// startDir holds the start record of each partition a job began to load:
// _sluice/start/<topic>/<partition>, the offset as text, created
// exclusively by the first plan (so start: latest is decided once, and a
// record deleted by retention before the first commit is an out-of-range
// decision, never a silent move). The writers' origin, fixed by the first
// commit, agrees with it.
const startDir = "_sluice/start"

func startPath(topic string, partition int32) string {
	return path.Join(startDir, topic, strconv.Itoa(int(partition)))
}

// startRecord reads a partition's start record (ok false when none).
func (l *Loader) startRecord(topic string, partition int32) (int64, bool, error) {
	b, err := vfs.ReadFile(l.fs, startPath(topic, partition))
	if errors.Is(err, vfs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("jobs: start record %s: %q is not an offset", startPath(topic, partition), b)
	}
	return n, true, nil
}

// recoverAndPreview recovers every partition of the job (finishing the
// commits a crash interrupted, removing attempts whose lease expired), then
// plans on what recovery left.
func (l *Loader) recoverAndPreview(ctx context.Context) (*inputformat.Plan, error) {
	first, err := l.Preview(ctx)
	if err != nil {
		return nil, err
	}
	changed := false
	for _, pp := range first.Partitions {
		rep, err := l.store.Recover(pp.Topic, pp.Partition)
		if err != nil {
			return nil, fmt.Errorf("jobs: recovering %s/%d: %w", pp.Topic, pp.Partition, err)
		}
		changed = changed || len(rep.RolledForward) > 0 || len(rep.TornMovedAway) > 0
	}
	if !changed {
		return first, nil
	}
	return l.Preview(ctx)
}

// Prepare does what a plan decided before its tasks run: it records the
// start of partitions never loaded, and commits each range lost to
// retention under on_offset_out_of_range: skip as a commit with no files
// (so the partition's chain of commits goes on; the loss is in the run
// report). Plan and Run call it.
func (l *Loader) Prepare(ctx context.Context, plan *inputformat.Plan) error {
	if err := l.fence(); err != nil {
		return err
	}
	if err := l.recordTopics(plan); err != nil {
		return err
	}
	for _, pp := range plan.Partitions {
		if pp.Origin {
			if err := l.fixStart(pp); err != nil {
				return err
			}
		}
		if pp.Skipped != nil {
			if err := l.commitSkip(pp.Topic, pp.Partition, *pp.Skipped); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

func (l *Loader) fixStart(pp inputformat.PartitionPlan) error {
	p := startPath(pp.Topic, pp.Partition)
	if err := l.fs.MkdirAll(path.Dir(p)); err != nil {
		return fmt.Errorf("jobs: start record: %w", err)
	}
	err := l.fs.WriteExclusive(p, []byte(strconv.FormatInt(pp.Start, 10)+"\n"))
	if err == nil || !errors.Is(err, vfs.ErrExist) {
		return err
	}
	got, _, rerr := l.startRecord(pp.Topic, pp.Partition)
	if rerr != nil {
		return rerr
	}
	if got != pp.Start {
		return fmt.Errorf("%w: %s/%d: another run fixed the start at %d meanwhile (this plan said %d); plan again",
			ErrNotReady, pp.Topic, pp.Partition, got, pp.Start)
	}
	return nil
}

// commitSkip commits [r.Start, r.End) with no files.
func (l *Loader) commitSkip(topic string, partition int32, r inputformat.Range) error {
	s := inputformat.Split{Topic: topic, Partition: partition, Start: r.Start, End: r.End}
	w, err := writers.NewSplitWriter(l.store, s, writers.Config{Format: l.fmtOpts})
	if err != nil {
		return err
	}
	w.CountLost(r.End - r.Start) // for the audit: the records' loss is in the commit
	res, err := w.Commit(r.End)
	if err != nil {
		w.Abort()
		return fmt.Errorf("jobs: recording the skip of %s: %w", s, err)
	}
	if !res.Won && (res.Manifest == nil || res.Manifest.End != r.End) {
		return fmt.Errorf("%w: %s: another run committed at %d meanwhile; plan again", ErrNotReady, s, r.Start)
	}
	l.log.Warn("records deleted before they were loaded: skipped (on_offset_out_of_range: skip)", "split", s.String())
	return nil
}
