package writers

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/mutate"
	"github.com/sluicehq/sluice/internal/topicname"
	"github.com/sluicehq/sluice/internal/vfs"
)

// attemptTimeLayout is how an attempt ID starts: the attempt's creation time
// (recovery reads it to give an attempt without a lease yet its first period).
const attemptTimeLayout = "20060102T150405Z"

// Commit-protocol errors.
var (
	// ErrCommitUnknown reports a commit whose outcome could not be learned
	// (the manifest write failed and the manifest could not be read back).
	// Run Recover and look again.
	ErrCommitUnknown = errors.New("writers: commit outcome unknown")
	// ErrBrokenCommit reports a committed file found neither at its
	// temporary nor at its final path: something outside sluice removed it.
	ErrBrokenCommit = errors.New("writers: committed file missing")
	// ErrSplit reports a bad split or a record outside its split.
	ErrSplit = errors.New("writers: split")
	// ErrNotReached reports a commit whose reader did not reach the split's
	// end (it stopped early, or read past it). Nothing was committed; the
	// attempt is left as it was (write on, or Abort).
	ErrNotReached = errors.New("writers: the reader did not reach the split's end")
)

// Split is an offset range [Start, End) of one topic partition: one task.
// The type belongs to inputformat, which plans and reads splits.
type Split = inputformat.Split

// validateSplit checks a split can be written: a legal Kafka topic name
// (safe as a path element) and a non-empty range.
func validateSplit(s Split) error {
	if err := topicname.Check(s.Topic); err != nil {
		return fmt.Errorf("%w: %w", ErrSplit, err)
	}
	if s.Partition < 0 || s.Start < 0 || s.End <= s.Start {
		return fmt.Errorf("%w: %s (want 0 <= start < end and partition >= 0)", ErrSplit, s)
	}
	return nil
}

// StoreOptions tune a Store; zero values are the defaults.
type StoreOptions struct {
	// Clock is the store's time (nil: clock.Real): it reads the time and
	// waits between re-reads of a manifest still being written only
	// through it (tests pass a clock.Manual and advance it).
	Clock clock.Clock
	// Lease is how long an attempt's lease lasts unless renewed (default
	// 10m; attempts renew it every third of that). Recover removes an
	// attempt that never committed only once its lease expired, so a live
	// attempt is never robbed. Negative: every lease counts as expired
	// (tests that know their attempts are dead).
	Lease time.Duration
	// TornGrace: Recover moves a torn (partial) manifest aside only when it
	// is older than this (default 10m): its writer is presumed dead. Negative
	// means immediately.
	TornGrace time.Duration
	// ManifestWait bounds how long a losing attempt waits for the winner's
	// manifest to become readable (HDFS writes it in place; default 30s).
	ManifestWait time.Duration
	// Logger receives recovery and commit events (default: discard).
	Logger *slog.Logger
}

// Store runs the commit protocol on one output root.
type Store struct {
	fs   vfs.FS
	opts StoreOptions
	log  *slog.Logger
}

// NewStore returns a Store on fs.
func NewStore(fs vfs.FS, opts StoreOptions) *Store {
	opts.Clock = clock.OrReal(opts.Clock)
	if opts.Lease == 0 {
		opts.Lease = 10 * time.Minute
	}
	if opts.TornGrace == 0 {
		opts.TornGrace = 10 * time.Minute
	}
	if opts.ManifestWait == 0 {
		opts.ManifestWait = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Store{fs: fs, opts: opts, log: log}
}

// FS returns the store's file system.
func (s *Store) FS() vfs.FS { return s.fs }

// Attempt is one try at writing a split. Its files live under
// _sluice/tmp/<topic>/<partition>/<start>/<id>/ until it commits, next to
// its lease (renewed while it lives) and, once it commits, its intent.
type Attempt struct {
	store   *Store
	split   Split
	id      string
	dir     string
	made    map[string]bool // directories already created
	lease   string          // the current lease file
	renewAt time.Time       // when the lease is due for renewal
	intent  bool            // the commit intent is written: never Abort
	audit   *AuditCounts    // the records counted (SplitWriter.Count), for the manifest
}

// NewAttempt starts an attempt of split with a fresh random id: it creates
// the attempt directory and takes the attempt's lease.
func (s *Store) NewAttempt(split Split) (*Attempt, error) {
	if err := validateSplit(split); err != nil {
		return nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	id := s.opts.Clock.Now().UTC().Format(attemptTimeLayout) + "-" + hex.EncodeToString(b[:])
	a := &Attempt{store: s, split: split, id: id,
		dir: attemptDir(split.Topic, split.Partition, split.Start, id), made: map[string]bool{}}
	// Another attempt's cleanup may remove the split's empty directory
	// between our creating it and creating the attempt directory inside it
	// (removeIfEmpty): that is not a failure, so make the path again.
	var err error
	for try := 0; try < 8; try++ {
		if err = s.fs.MkdirAll(a.dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("writers: starting an attempt of %s: %w", split, err)
	}
	a.made[a.dir] = true
	if err := a.Renew(); err != nil {
		return nil, err
	}
	return a, nil
}

// ID names the attempt.
func (a *Attempt) ID() string { return a.id }

// Split returns the attempt's split.
func (a *Attempt) Split() Split { return a.split }

// TempPath returns where the attempt writes a file named rel.
func (a *Attempt) TempPath(rel string) string { return path.Join(a.dir, rel) }

// Create creates the temporary file rel (relative to the attempt directory).
func (a *Attempt) Create(rel string) (vfs.File, string, error) {
	p := a.TempPath(rel)
	if d := path.Dir(p); !a.made[d] {
		if err := a.store.fs.MkdirAll(d); err != nil {
			return nil, "", err
		}
		a.made[d] = true
	}
	f, err := a.store.fs.CreateExclusive(p)
	return f, p, err
}

// Abort deletes the attempt's temporaries (it never committed).
// Once Commit has written the attempt's intent (any outcome but
// ErrNotReached, ErrNotChained or a failure before the intent) Abort
// refuses with ErrCommitUnknown: the commit may be completed by Recover,
// which then needs the files.
func (a *Attempt) Abort() error {
	if a.intent {
		return fmt.Errorf("%w: %s: the attempt's commit intent is written; run Recover instead of Abort", ErrCommitUnknown, a.split)
	}
	return a.remove()
}

// remove deletes the attempt directory.
func (a *Attempt) remove() error {
	if err := a.store.fs.RemoveAll(a.dir); err != nil {
		return err
	}
	a.store.removeIfEmpty(path.Dir(a.dir))
	return nil
}

// Result is the outcome of a commit.
type Result struct {
	// Won is true when this attempt's manifest is the split's commit.
	Won bool
	// Manifest is the split's commit: this attempt's when Won, else the
	// winner's (nil if it could not be read).
	Manifest *Manifest
}

// Commit commits the attempt's files (their Temp paths must lie under the
// attempt directory) as the split's output. reached is the offset the
// reader reached: it must be the split's end, else Commit refuses with
// ErrNotReached and changes nothing. The split must continue the
// partition's chain (see ErrNotChained): its start is the partition's origin
// (fixed by the first commit) or the end of a committed manifest.
//
// Commit creates the split's manifest exclusively, then moves the files to
// their final paths. An attempt that loses (a manifest exists) deletes its
// temporaries and returns Won=false with a nil error and the winner's
// manifest, whose End may differ from this split's. After Won=true a
// non-nil error means the commit stands but some files are not yet at their
// final paths: Recover finishes them. ErrAttemptExpired: recovery took the
// attempt (its lease expired); ErrCommitUnknown: run Recover, which
// completes the commit from the attempt's intent if it was written.
func (a *Attempt) Commit(files []File, reached int64) (Result, error) {
	s := a.store
	if reached != a.split.End {
		return Result{}, fmt.Errorf("%w: %s, reached %d", ErrNotReached, a.split, reached)
	}
	m := &Manifest{
		Version: ManifestVersion, Topic: a.split.Topic, Partition: a.split.Partition,
		Start: a.split.Start, End: a.split.End, Attempt: a.id, Committed: s.opts.Clock.Now().UTC(),
		Files: files, Audit: a.audit,
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Temp, a.dir+"/") {
			return Result{}, fmt.Errorf("%w: file %s is not under the attempt directory %s", ErrSplit, f.Temp, a.dir)
		}
		if f.First < a.split.Start || f.Last >= a.split.End || f.Last < f.First {
			return Result{}, fmt.Errorf("%w: file %s holds [%d, %d], outside %s", ErrSplit, f.Temp, f.First, f.Last, a.split)
		}
		m.Records += f.Records
	}
	data, err := m.Encode()
	if err != nil {
		return Result{}, err
	}
	if err := s.checkChain(a.split); err != nil {
		return Result{}, err
	}
	// Every file must still be there: a stalled attempt whose directory
	// recovery removed (its lease had expired) must not commit what is gone.
	for _, f := range files {
		if _, err := s.fs.Stat(f.Temp); errors.Is(err, vfs.ErrNotExist) {
			return Result{}, fmt.Errorf("%w: %s is gone", ErrAttemptExpired, f.Temp)
		} else if err != nil {
			return Result{}, fmt.Errorf("writers: commit %s: %w", a.split, err)
		}
	}
	// The intent: from here on recovery completes this commit rather than
	// remove the attempt.
	if err := a.claim(data); err != nil {
		return Result{}, err
	}
	mp := ManifestPath(a.split.Topic, a.split.Partition, a.split.Start)
	write := s.fs.WriteExclusive
	if mutate.Enabled(mutate.ExclusiveManifest) { // test-only: write over a winner's manifest
		write = func(p string, b []byte) error { return vfs.WriteFileAtomic(s.fs, path.Dir(p), path.Base(p), b) }
	}
	werr := write(mp, data)
	if werr != nil {
		// Learn the outcome from the manifest itself (on HDFS the winner
		// may still be writing it: wait a little for it to become whole).
		cur, rerr := s.awaitManifest(mp)
		switch {
		case rerr == nil && cur.Attempt == a.id:
			// Our manifest is there and whole: we won after all.
		case rerr == nil:
			s.log.Info("commit lost", "split", a.split.String(), "attempt", a.id, "winner", cur.Attempt)
			if err := a.remove(); err != nil {
				return Result{Won: false, Manifest: cur}, fmt.Errorf("writers: lost commit of %s, removing temporaries: %w", a.split, err)
			}
			return Result{Won: false, Manifest: cur}, nil
		case errors.Is(rerr, vfs.ErrNotExist):
			// The intent stands (recovery may be acting on it already):
			// Recover completes the commit.
			return Result{}, fmt.Errorf("%w: %s: writing the manifest: %w (run Recover: it completes the commit from the attempt's intent)", ErrCommitUnknown, a.split, werr)
		default:
			return Result{}, fmt.Errorf("%w: %s: writing the manifest: %w; reading it back: %w", ErrCommitUnknown, a.split, werr, rerr)
		}
	}
	s.log.Info("committed", "split", a.split.String(), "attempt", a.id, "files", len(files), "records", m.Records)
	if testHookAfterManifest != nil {
		testHookAfterManifest()
	}
	if err := s.rollForward(m); err != nil {
		return Result{Won: true, Manifest: m}, err
	}
	return Result{Won: true, Manifest: m}, nil
}

// awaitManifest reads a manifest, re-reading a torn one with backoff for up
// to ManifestWait while its writer may still be finishing it.
func (s *Store) awaitManifest(p string) (*Manifest, error) {
	return await(s, func() (*Manifest, error) { return s.readManifest(p) })
}

// await calls read until it returns something other than a torn record or
// ManifestWait passed (on HDFS a record is written in place and may be
// read while its writer is still writing it).
func await[T any](s *Store, read func() (T, error)) (T, error) {
	deadline := s.opts.Clock.Now().Add(s.opts.ManifestWait)
	wait := 5 * time.Millisecond
	for {
		v, err := read()
		if !errors.Is(err, ErrTornManifest) || !s.opts.Clock.Now().Before(deadline) {
			return v, err
		}
		<-s.opts.Clock.NewTimer(wait).C() // backoff against the file system
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// testHookAfterManifest runs between the manifest and the moves (tests).
var testHookAfterManifest func()

func (s *Store) readManifest(p string) (*Manifest, error) {
	return readRecord(s, p, DecodeManifest)
}

// readRecord reads and decodes the record at p; a decoding error names p.
func readRecord[T any](s *Store, p string, decode func([]byte) (T, error)) (T, error) {
	b, err := vfs.ReadFile(s.fs, p)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := decode(b)
	if err != nil {
		return v, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// rollForward moves every file of a committed manifest to its final path
// and removes the attempt directory. It is idempotent: a file already at its
// final path (and gone from its temporary path) is done.
func (s *Store) rollForward(m *Manifest) error {
	for _, f := range m.Files {
		if err := s.fs.MkdirAll(path.Dir(f.Final)); err != nil {
			return fmt.Errorf("writers: roll forward %s: %w", f.Final, err)
		}
		err := s.fs.RenameNoReplace(f.Temp, f.Final)
		switch {
		case err == nil:
		case errors.Is(err, vfs.ErrExist):
			// Moved before (local link done, unlink not): drop the temp copy.
			if err := s.fs.Remove(f.Temp); err != nil {
				return fmt.Errorf("writers: roll forward %s: %w", f.Final, err)
			}
		case errors.Is(err, vfs.ErrNotExist):
			ok, serr := vfs.Exists(s.fs, f.Final)
			if serr != nil {
				return fmt.Errorf("writers: roll forward %s: %w", f.Final, serr)
			}
			if !ok {
				return fmt.Errorf("%w: %s (temporary %s) of commit %s/%d@%d", ErrBrokenCommit, f.Final, f.Temp, m.Topic, m.Partition, m.Start)
			}
		default:
			return fmt.Errorf("writers: roll forward %s: %w", f.Final, err)
		}
	}
	dir := attemptDir(m.Topic, m.Partition, m.Start, m.Attempt)
	if err := s.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("writers: roll forward, removing %s: %w", dir, err)
	}
	s.removeIfEmpty(path.Dir(dir))
	return nil
}

// removeIfEmpty deletes an empty directory, best effort (tidiness only).
func (s *Store) removeIfEmpty(dir string) {
	if ents, err := s.fs.List(dir); err == nil && len(ents) == 0 {
		s.fs.Remove(dir)
	}
}

// Commits returns the manifests of a partition ordered by start. A torn
// manifest is reported with an error wrapping ErrTornManifest (after the
// readable ones): run Recover.
func (s *Store) Commits(topic string, partition int32) ([]*Manifest, error) {
	return s.CommitsFrom(topic, partition, math.MinInt64)
}

// CommitsFrom is Commits of the manifests whose start is at least from:
// one listing, and only those manifests read (a reader that keeps a
// cursor, as the scheduler's completeness check, reads each commit once).
func (s *Store) CommitsFrom(topic string, partition int32, from int64) ([]*Manifest, error) {
	starts, err := s.starts(topic, partition)
	if err != nil {
		return nil, err
	}
	var out []*Manifest
	var torn []error
	for _, st := range starts {
		if st < from {
			continue
		}
		m, err := s.readManifest(ManifestPath(topic, partition, st))
		if err != nil {
			if errors.Is(err, ErrTornManifest) {
				torn = append(torn, err)
				continue
			}
			return nil, err
		}
		out = append(out, m)
	}
	return out, errors.Join(torn...)
}

func parseStart(name string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSuffix(name, ".json"), 10, 64)
	return n, err == nil
}
