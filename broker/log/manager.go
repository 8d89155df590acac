package log

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/topicname"
	"github.com/sluicehq/sluice/internal/vfs"
)

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	FS           vfs.FS      // vfs.OS{} in production
	Dir          string      // the data directory
	Clock        clock.Clock // nil = clock.Real
	MaxOpenFiles int         // bound on cached segment file handles; 0 = 1024
	// MaxLoadedIndexes bounds the sealed segments whose indexes are held in
	// memory; 0 = 1024.
	MaxLoadedIndexes int
	Logger           *slog.Logger // nil = discard
}

// Manager owns the partition logs of one data directory and the cache that
// bounds their open files.
type Manager struct {
	opts    ManagerOptions
	cache   *fileCache
	indexes *indexLRU
	metrics *counters
	clean   bool // the directory was shut down cleanly last time

	mu      sync.Mutex
	known   map[TopicPartition]bool // found on disk or created
	fresh   map[TopicPartition]bool // directories OpenMany just created, empty: nothing to read
	logs    map[TopicPartition]*Log
	opening map[TopicPartition]chan struct{} // partitions being opened, closed when done
	closed  bool
}

// OpenManager opens (creating if needed) a data directory. It finds the
// <topic>-<partition> directories there; each is recovered when it is
// opened with Open. A clean-shutdown marker left by Close is consumed, so a
// crash after this point is recognised as unclean.
func OpenManager(opts ManagerOptions) (*Manager, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Dir == "" {
		return nil, errors.New("log: ManagerOptions.Dir is empty")
	}
	m := &Manager{
		opts: opts, cache: newFileCache(opts.FS, opts.MaxOpenFiles), metrics: &counters{},
		known: map[TopicPartition]bool{}, fresh: map[TopicPartition]bool{}, logs: map[TopicPartition]*Log{}, opening: map[TopicPartition]chan struct{}{},
	}
	m.indexes = newIndexLRU(opts.MaxLoadedIndexes, m.metrics)
	if _, err := opts.FS.Stat(opts.Dir); err != nil {
		if err := opts.FS.MkdirAll(opts.Dir); err != nil {
			return nil, fmt.Errorf("log: create data dir: %w", err)
		}
		if err := opts.FS.SyncDir(path.Dir(path.Clean(opts.Dir))); err != nil {
			return nil, fmt.Errorf("log: sync the data dir's parent: %w", err)
		}
	}
	names, err := vfs.ListNames(opts.FS, opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("log: list data dir: %w", err)
	}
	for _, name := range names {
		full := path.Join(opts.Dir, name)
		switch {
		case name == cleanMarkerFile:
			m.clean = true
		case strings.HasSuffix(name, deleteSuffix):
			if err := opts.FS.RemoveAll(full); err != nil {
				return nil, fmt.Errorf("log: finish deleting %s: %w", full, err)
			}
		default:
			if st, err := opts.FS.Stat(full); err == nil && st.IsDir {
				if tp, ok := parsePartitionDir(name); ok {
					m.known[tp] = true
				}
			}
		}
	}
	if m.clean {
		if err := opts.FS.Remove(path.Join(opts.Dir, cleanMarkerFile)); err != nil {
			return nil, fmt.Errorf("log: remove clean-shutdown marker: %w", err)
		}
		if err := opts.FS.SyncDir(opts.Dir); err != nil {
			return nil, fmt.Errorf("log: sync data dir: %w", err)
		}
	}
	return m, nil
}

const deleteSuffix = "-delete"

func parsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != name[i+1:] {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// OpenFiles returns how many segment files the cache holds open.
func (m *Manager) OpenFiles() int { n, _ := m.cache.stats(); return n }

// Partitions lists the partitions found on disk or created, sorted.
func (m *Manager) Partitions() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]TopicPartition, 0, len(m.known))
	for tp := range m.known {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// Open returns the log of tp, opening (and recovering) or creating it. If it
// is already open, the open log is returned and cfg is ignored. Opening one
// partition does not block Get or Open of others.
func (m *Manager) Open(tp TopicPartition, cfg Config) (*Log, error) {
	if tp.Partition < 0 || topicname.Check(tp.Topic) != nil {
		return nil, fmt.Errorf("log: invalid partition %q/%d", tp.Topic, tp.Partition)
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		if l, ok := m.logs[tp]; ok {
			m.mu.Unlock()
			return l, nil
		}
		if wait, busy := m.opening[tp]; busy {
			m.mu.Unlock()
			<-wait // another goroutine is opening tp: use its result
			continue
		}
		done := make(chan struct{})
		m.opening[tp] = done
		known, fresh := m.known[tp], m.fresh[tp]
		delete(m.fresh, tp)
		m.mu.Unlock()

		l, err := m.openLocked(tp, cfg, known, fresh)
		m.mu.Lock()
		delete(m.opening, tp)
		closed := m.closed
		if err == nil && !closed {
			m.known[tp] = true
			m.logs[tp] = l
		}
		m.mu.Unlock()
		close(done)
		if err == nil && closed { // Close ran meanwhile
			l.closeLocked()
			return nil, ErrClosed
		}
		return l, err
	}
}

// openLocked opens tp's log; the caller holds tp's slot in m.opening.
func (m *Manager) openLocked(tp TopicPartition, cfg Config, known, fresh bool) (*Log, error) {
	dir := path.Join(m.opts.Dir, tp.dirName())
	if !known {
		if err := m.opts.FS.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("log: create %s: %w", dir, err)
		}
		if err := m.opts.FS.SyncDir(m.opts.Dir); err != nil {
			return nil, fmt.Errorf("log: sync data dir: %w", err)
		}
	}
	l, err := openLog(openParams{
		fs: m.opts.FS, dir: dir, tp: tp, cfg: cfg, clock: m.opts.Clock, logger: m.opts.Logger,
		cache: m.cache, metrics: m.metrics, indexes: m.indexes, clean: m.clean, mgr: m, fresh: fresh || !known,
	})
	if err != nil {
		return nil, fmt.Errorf("log: open %s: %w", tp, err)
	}
	return l, nil
}

// Get returns tp's log if it is open.
func (m *Manager) Get(tp TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// forget is called by Log.Close.
func (m *Manager) forget(l *Log) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.logs[l.tp] == l {
		delete(m.logs, l.tp)
	}
}

// Delete closes tp's log and removes its directory: it is first renamed to
// <dir>-delete (so a crash mid-removal finishes at the next open), then removed.
func (m *Manager) Delete(tp TopicPartition) error {
	return m.DeleteMany([]TopicPartition{tp})
}

// RunRetention runs one pass of the periodic work over every open log:
// flush.ms, retention.ms / retention.bytes and the checkpoint (recovery point,
// high watermark, producer snapshot). The owner calls it on a timer.
func (m *Manager) RunRetention() error {
	return forEachLog(m.openLogs(), func(l *Log) error { return l.maintain() })
}

// parallelism is how many logs RunRetention and Close work on at once: their
// work is mostly fsync, which a disk serves better several at a time.
const parallelism = 8

func forEachLog(logs []*Log, fn func(*Log) error) error {
	return forEach(logs, func(l *Log) error {
		if err := fn(l); err != nil {
			return fmt.Errorf("%s: %w", l.tp, err)
		}
		return nil
	})
}

func (m *Manager) openLogs() []*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	return out
}

// Close closes every log (flushing and checkpointing each) and, if all went
// well, writes the clean-shutdown marker so that the next open scans nothing.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	if err := forEachLog(m.openLogs(), (*Log).Close); err != nil {
		return err
	}
	f, err := m.opts.FS.Create(path.Join(m.opts.Dir, cleanMarkerFile))
	if err == nil {
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = m.opts.FS.SyncDir(m.opts.Dir)
	}
	if err != nil {
		return fmt.Errorf("log: write clean-shutdown marker: %w", err)
	}
	return nil
}

// OpenMany opens (creating where needed) the logs of tps with one config,
// as a new topic or a start-up does: the missing directories are created
// first and made durable with one sync of the data directory, not one per
// partition, and the logs are opened several at a time. The logs come back
// in the order of tps. On error, the logs opened so far stay open (the
// caller deletes or closes them).
func (m *Manager) OpenMany(tps []TopicPartition, cfg Config) ([]*Log, error) {
	var missing []TopicPartition
	m.mu.Lock()
	for _, tp := range tps {
		if !m.known[tp] {
			missing = append(missing, tp)
		}
	}
	m.mu.Unlock()
	if len(missing) > 0 {
		err := forEach(missing, func(tp TopicPartition) error {
			return m.opts.FS.MkdirAll(path.Join(m.opts.Dir, tp.dirName()))
		})
		if err == nil {
			err = m.opts.FS.SyncDir(m.opts.Dir)
		}
		if err != nil {
			return nil, fmt.Errorf("log: create partition directories: %w", err)
		}
		m.mu.Lock()
		for _, tp := range missing {
			m.known[tp], m.fresh[tp] = true, true
		}
		m.mu.Unlock()
	}
	logs := make([]*Log, len(tps))
	idx := make(map[TopicPartition]int, len(tps))
	for i, tp := range tps {
		idx[tp] = i
	}
	err := forEach(tps, func(tp TopicPartition) error {
		l, err := m.Open(tp, cfg)
		logs[idx[tp]] = l
		return err
	})
	return logs, err
}

// DeleteMany deletes the logs of tps as Delete does, with two syncs of the
// data directory in all rather than two per partition: every directory is
// first renamed to <dir>-delete (a crash from here on finishes the removal
// at the next OpenManager), then removed.
func (m *Manager) DeleteMany(tps []TopicPartition) error {
	var trash []string
	var tmu sync.Mutex
	err := forEach(tps, func(tp TopicPartition) error {
		if !m.detach(tp) {
			return nil
		}
		dir := path.Join(m.opts.Dir, tp.dirName())
		if err := m.opts.FS.RemoveAll(dir + deleteSuffix); err != nil {
			return err
		}
		if err := m.opts.FS.RenameReplace(dir, dir+deleteSuffix); err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		tmu.Lock()
		trash = append(trash, dir+deleteSuffix)
		tmu.Unlock()
		return nil
	})
	if serr := m.opts.FS.SyncDir(m.opts.Dir); err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("log: delete partitions: %w", err)
	}
	if err := forEach(trash, m.opts.FS.RemoveAll); err != nil {
		return fmt.Errorf("log: delete partitions: %w", err)
	}
	return m.opts.FS.SyncDir(m.opts.Dir)
}

// detach closes tp's log (if open) for deletion and forgets it; it reports
// whether tp existed.
func (m *Manager) detach(tp TopicPartition) bool {
	m.mu.Lock()
	l := m.logs[tp]
	known := m.known[tp]
	m.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		for _, s := range l.segments {
			m.cache.remove(s.h)
			m.indexes.remove(s)
		}
		l.closed = true
		l.notifyLocked()
		l.mu.Unlock()
	}
	m.mu.Lock()
	delete(m.logs, tp)
	delete(m.known, tp)
	delete(m.fresh, tp)
	m.mu.Unlock()
	return l != nil || known
}

// forEach runs fn on every item, parallelism at a time, and joins the errors.
func forEach[T any](items []T, fn func(T) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	work := make(chan T)
	for i := 0; i < min(parallelism, len(items)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := fn(it); err != nil {
					mu.Lock()
					if len(errs) < 10 {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}
