package writers

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

// Compaction records: a rewrite of committed files into others, committed
// like a split (one record created exclusively is the commit), without
// touching the split manifests (so checkpoints, the chain and the audit
// stay as they are).
//
//	_sluice/compactions/<topic>/<partition>/
//	├── 00000000000000000003.json          record 3: files replaced → files written
//	└── tmp/00000000000000000004/          the rewrite of record 4 before (and while) it commits
//	    └── dt=2024-05-01/hr=13/<name>.inprogress
//
// A record's envelope is the manifest's (magic sluice-compaction). The
// committed files of a partition (CommittedFiles) are the files of its
// manifests with the records applied in sequence order: each removes the
// files it replaced and adds the files it wrote. A reader that lists the
// manifests and then the records sees, for each rewrite, either all of the
// old files or all of the new ones.
//
// Protocol of record N (the job lock keeps one compactor per job):
//
//	mkdir tmp/N, write the new files there (durable on close)
//	create N.json exclusively                    ◄── the commit point
//	move each new file tmp → final (never replacing; idempotent)
//	remove (or move aside, Compaction.MovedTo) each replaced file; sync their directories
//	remove tmp/N
//
// RecoverCompactions finishes every tmp/N whose record exists and removes
// every other one. So a crash at any point leaves either the old files (no
// record) or a record a rerun completes.
const compactionsDir = "_sluice/compactions"

const compactionMagic = "sluice-compaction"

// ErrCompaction reports a compaction that cannot be done as asked.
var ErrCompaction = errors.New("writers: compaction")

// Compaction is the commit record of one rewrite of a partition's files.
type Compaction struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Seq       int64     `json:"seq"`
	Committed time.Time `json:"committed"`
	// Reason says why: "compact" or "replay from <offset>".
	Reason string `json:"reason"`
	// Replaced are the files this rewrite replaced.
	Replaced []Replaced `json:"replaced"`
	// MovedTo, when set, is where the replaced files were moved (keeping
	// their relative paths) instead of being removed.
	MovedTo string `json:"moved_to,omitempty"`
	// Files are the files written, in the order of their rows' offsets.
	Files []CompactedFile `json:"files"`
}

// Replaced names a file a rewrite replaced: its final path and the commit
// that wrote it (a replay's reload writes its files under the same names).
type Replaced struct {
	Final  string `json:"final"`
	Commit string `json:"commit"` // ViewFile.Commit
}

// CompactedFile is a file a compaction wrote.
type CompactedFile struct {
	File
	// Sources are the rows the file holds, in its row order: the rows of
	// each split commit, so that a replay can keep those of the commits
	// before its checkpoint.
	Sources []Source `json:"sources"`
}

// Source is a run of a compacted file's rows that one split commit wrote.
type Source struct {
	Start   int64  `json:"start"`   // the split manifest's start
	Attempt string `json:"attempt"` // and its attempt (a topic started over reuses starts)
	Final   string `json:"final"`   // the file the loader wrote them to
	Records int64  `json:"records"`
	First   int64  `json:"first_offset"`
	Last    int64  `json:"last_offset"`
}

// Encode returns the record's bytes (envelope and JSON).
func (c *Compaction) Encode() ([]byte, error) {
	body, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return seal(compactionMagic, append(body, '\n')), nil
}

// DecodeCompaction verifies and parses a compaction record.
func DecodeCompaction(b []byte) (*Compaction, error) {
	var c Compaction
	if err := openJSON(compactionMagic, b, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// CompactionPath is _sluice/compactions/<topic>/<partition>/<seq %020d>.json.
func CompactionPath(topic string, partition int32, seq int64) string {
	return path.Join(partDir(compactionsDir, topic, partition), fmt.Sprintf("%020d.json", seq))
}

// CompactionTempDir is where the rewrite of record seq writes its files.
func CompactionTempDir(topic string, partition int32, seq int64) string {
	return path.Join(partDir(compactionsDir, topic, partition), "tmp", fmt.Sprintf("%020d", seq))
}

// compactionSeqs lists the sequence numbers of a partition's records.
func (s *Store) compactionSeqs(topic string, partition int32) ([]int64, error) {
	ents, err := s.fs.List(partDir(compactionsDir, topic, partition))
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		if e.IsDir || !strings.HasSuffix(e.Name, ".json") {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSuffix(e.Name, ".json"), 10, 64); err == nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Compactions returns a partition's compaction records in sequence order.
func (s *Store) Compactions(topic string, partition int32) ([]*Compaction, error) {
	seqs, err := s.compactionSeqs(topic, partition)
	if err != nil {
		return nil, err
	}
	out := make([]*Compaction, 0, len(seqs))
	for _, n := range seqs {
		c, err := readRecord(s, CompactionPath(topic, partition, n), DecodeCompaction)
		if errors.Is(err, ErrTornManifest) {
			continue // being written (HDFS writes in place): not committed yet
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ViewFile is one committed file of a partition: a split commit's own file
// or one a compaction wrote.
type ViewFile struct {
	File
	// Sources are the split commits whose rows the file holds, in its row
	// order (one for a file the loader wrote).
	Sources []Source
	// Compaction is the record that wrote the file (0: a split commit's).
	Compaction int64
	// Commit names what committed the file: the split manifest's attempt,
	// or "compaction <seq>".
	Commit string
}

// CommittedFiles returns the committed files of a partition: the files of
// manifests (as read by Commits) with the partition's compaction records
// applied, sorted by first offset. Read the manifests first, then call it:
// a rewrite committed in between shows as its new files.
func (s *Store) CommittedFiles(topic string, partition int32, manifests []*Manifest) ([]ViewFile, error) {
	cs, err := s.Compactions(topic, partition)
	if err != nil {
		return nil, err
	}
	return ApplyCompactions(manifests, cs), nil
}

// ApplyCompactions is the view of CommittedFiles over given manifests and
// records.
func ApplyCompactions(manifests []*Manifest, cs []*Compaction) []ViewFile {
	byFinal := map[string]ViewFile{}
	type commit struct {
		start   int64
		attempt string
	}
	committed := map[commit]bool{}
	for _, m := range manifests {
		committed[commit{m.Start, m.Attempt}] = true
		for _, f := range m.Files {
			byFinal[f.Final] = ViewFile{File: f, Commit: m.Attempt, Sources: []Source{{Start: m.Start, Attempt: m.Attempt, Final: f.Final,
				Records: f.Records, First: f.First, Last: f.Last}}}
		}
	}
	for _, c := range cs {
		for _, r := range c.Replaced {
			if byFinal[r.Final].Commit == r.Commit {
				delete(byFinal, r.Final)
			}
		}
	files:
		for _, f := range c.Files {
			// A file whose commits are no longer there (withdrawn, or
			// retired with a topic started over) is no longer committed.
			for _, src := range f.Sources {
				if !committed[commit{src.Start, src.Attempt}] {
					continue files
				}
			}
			byFinal[f.Final] = ViewFile{File: f.File, Sources: f.Sources, Compaction: c.Seq, Commit: fmt.Sprintf("compaction %d", c.Seq)}
		}
	}
	out := make([]ViewFile, 0, len(byFinal))
	for _, f := range byFinal {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].First != out[j].First {
			return out[i].First < out[j].First
		}
		return out[i].Final < out[j].Final
	})
	return out
}

// CompactionAttempt is a rewrite being written: its files go under its
// temporary directory until CommitCompaction.
type CompactionAttempt struct {
	store     *Store
	topic     string
	partition int32
	seq       int64
	dir       string
	made      map[string]bool
}

// NewCompaction starts the next rewrite of a partition (record number one
// past the newest). The caller holds the job lock: only one compactor may
// run on a partition. Run RecoverCompactions first.
func (s *Store) NewCompaction(topic string, partition int32) (*CompactionAttempt, error) {
	seqs, err := s.compactionSeqs(topic, partition)
	if err != nil {
		return nil, err
	}
	seq := int64(1)
	if len(seqs) > 0 {
		seq = seqs[len(seqs)-1] + 1
	}
	a := &CompactionAttempt{store: s, topic: topic, partition: partition, seq: seq,
		dir: CompactionTempDir(topic, partition, seq), made: map[string]bool{}}
	if err := s.fs.RemoveAll(a.dir); err != nil { // debris of a crashed attempt before its commit
		return nil, err
	}
	if err := s.fs.MkdirAll(a.dir); err != nil {
		return nil, fmt.Errorf("writers: starting compaction %d of %s/%d: %w", seq, topic, partition, err)
	}
	a.made[a.dir] = true
	return a, nil
}

// Topic is the attempt's topic.
func (a *CompactionAttempt) Topic() string { return a.topic }

// Partition is the attempt's partition.
func (a *CompactionAttempt) Partition() int32 { return a.partition }

// Seq is the record number this attempt commits as.
func (a *CompactionAttempt) Seq() int64 { return a.seq }

// Create creates the temporary file rel (a final path: dt=…/hr=…/name)
// under the attempt's directory.
func (a *CompactionAttempt) Create(rel string) (vfs.File, string, error) {
	p := path.Join(a.dir, rel+".inprogress")
	if d := path.Dir(p); !a.made[d] {
		if err := a.store.fs.MkdirAll(d); err != nil {
			return nil, "", err
		}
		a.made[d] = true
	}
	f, err := a.store.fs.CreateExclusive(p)
	return f, p, err
}

// Abort removes the attempt's files (it never committed).
func (a *CompactionAttempt) Abort() error { return a.store.fs.RemoveAll(a.dir) }

// CompactedName is the final name of a compacted file holding offsets
// [first, end] of a partition, written by record seq.
func CompactedName(topic string, partition int32, first, end, seq int64, ext string) string {
	return fmt.Sprintf("%s+%d+%d+%d+c%d.%s", topic, partition, first, end, seq, ext)
}

// Commit commits the rewrite: c (its Topic, Partition and Seq are set here)
// replaces c.Replaced with c.Files, whose Temp paths lie under the attempt.
// An error before the record exists leaves the old files committed (Abort,
// or leave it to RecoverCompactions); once the record exists the rewrite
// stands and RecoverCompactions finishes it.
func (a *CompactionAttempt) Commit(c *Compaction) (committed bool, err error) {
	s := a.store
	c.Topic, c.Partition, c.Seq = a.topic, a.partition, a.seq
	c.Committed = s.opts.Clock.Now().UTC()
	for _, f := range c.Files {
		if !strings.HasPrefix(f.Temp, a.dir+"/") {
			return false, fmt.Errorf("%w: file %s is not under the attempt directory %s", ErrCompaction, f.Temp, a.dir)
		}
	}
	data, err := c.Encode()
	if err != nil {
		return false, err
	}
	p := CompactionPath(a.topic, a.partition, a.seq)
	if err := s.fs.WriteExclusive(p, data); err != nil {
		cur, rerr := readRecord(s, p, DecodeCompaction)
		if rerr != nil || string(mustEncode(cur)) != string(data) {
			return false, fmt.Errorf("%w: writing %s: %w", ErrCommitUnknown, p, err)
		}
	}
	s.log.Info("compaction committed", "topic", a.topic, "partition", a.partition, "seq", a.seq,
		"replaced", len(c.Replaced), "files", len(c.Files))
	return true, s.finishCompaction(c)
}

func mustEncode(c *Compaction) []byte {
	b, _ := c.Encode()
	return b
}

// finishCompaction rolls a committed record forward: new files to their
// final paths, replaced files removed (or moved), the temporary directory
// removed. Idempotent.
func (s *Store) finishCompaction(c *Compaction) error {
	for _, f := range c.Files {
		if err := s.fs.MkdirAll(path.Dir(f.Final)); err != nil {
			return fmt.Errorf("writers: compaction %d: %w", c.Seq, err)
		}
		err := s.fs.RenameNoReplace(f.Temp, f.Final)
		switch {
		case err == nil:
		case errors.Is(err, vfs.ErrExist):
			if err := s.fs.Remove(f.Temp); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return fmt.Errorf("writers: compaction %d: %w", c.Seq, err)
			}
		case errors.Is(err, vfs.ErrNotExist):
			ok, serr := vfs.Exists(s.fs, f.Final)
			if serr != nil {
				return fmt.Errorf("writers: compaction %d: %w", c.Seq, serr)
			}
			if !ok {
				return fmt.Errorf("%w: %s (temporary %s) of compaction %s/%d#%d", ErrBrokenCommit, f.Final, f.Temp, c.Topic, c.Partition, c.Seq)
			}
		default:
			return fmt.Errorf("writers: compaction %d: %w", c.Seq, err)
		}
	}
	dirs := map[string]bool{}
	for _, rf := range c.Replaced {
		r := rf.Final
		var err error
		if c.MovedTo != "" {
			to := path.Join(c.MovedTo, r)
			if err = s.fs.MkdirAll(path.Dir(to)); err == nil {
				err = s.fs.RenameNoReplace(r, to)
			}
		} else {
			err = s.fs.Remove(r)
		}
		if err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("writers: compaction %d, removing %s: %w", c.Seq, r, err)
		}
		dirs[path.Dir(r)] = true
	}
	for d := range dirs {
		if err := s.fs.SyncDir(d); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("writers: compaction %d: %w", c.Seq, err)
		}
	}
	if err := s.fs.RemoveAll(CompactionTempDir(c.Topic, c.Partition, c.Seq)); err != nil {
		return fmt.Errorf("writers: compaction %d: %w", c.Seq, err)
	}
	return nil
}

// RecoverCompactions finishes the rewrites of a partition that committed
// and removes the temporaries of those that did not. It returns the
// numbers of the records it finished. The caller holds the job lock.
func (s *Store) RecoverCompactions(topic string, partition int32) ([]int64, error) {
	base := path.Join(partDir(compactionsDir, topic, partition), "tmp")
	ents, err := s.fs.List(base)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("writers: recover compactions of %s/%d: %w", topic, partition, err)
	}
	var done []int64
	for _, e := range ents {
		seq, err := strconv.ParseInt(e.Name, 10, 64)
		if err != nil || !e.IsDir {
			continue
		}
		p := CompactionPath(topic, partition, seq)
		c, err := readRecord(s, p, DecodeCompaction)
		if errors.Is(err, ErrTornManifest) {
			// A dead writer's partial record (the caller holds the job
			// lock): nothing of it was moved; it never committed.
			if err := s.fs.Remove(p); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return done, err
			}
			err = vfs.ErrNotExist
		}
		switch {
		case errors.Is(err, vfs.ErrNotExist):
			if err := s.fs.RemoveAll(path.Join(base, e.Name)); err != nil {
				return done, err
			}
		case err != nil:
			return done, err
		default:
			if err := s.finishCompaction(c); err != nil {
				return done, err
			}
			done = append(done, seq)
		}
	}
	return done, nil
}
