package log

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"

	"github.com/sluicehq/sluice/broker/log/vfs"
)

const indexEntrySize = 8

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ManagerOptions configure a Manager.
type ManagerOptions struct {
	FS           vfs.FS // vfs.OS in production
	Dir          string // the data directory
	Clock        Clock  // nil = wall clock
	MaxOpenFiles int    // bound on open segment file handles; 0 = a default
	Logger       *slog.Logger
}

// Manager owns the partition logs of one data directory.
type Manager struct {
	mu   sync.Mutex
	opts ManagerOptions
	logs map[TopicPartition]*Log
}

// OpenManager opens a data directory.
func OpenManager(opts ManagerOptions) (*Manager, error) {
	if opts.Clock == nil {
		opts.Clock = wallClock{}
	}
	return &Manager{opts: opts, logs: map[TopicPartition]*Log{}}, nil
}

// Partitions lists known partitions.
func (m *Manager) Partitions() []TopicPartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []TopicPartition
	for tp := range m.logs {
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

// Open opens or creates a partition log.
func (m *Manager) Open(tp TopicPartition, cfg Config) (*Log, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	l := &Log{tp: tp, cfg: cfg, clock: m.opts.Clock}
	m.logs[tp] = l
	return l, nil
}

// Get returns an open log.
func (m *Manager) Get(tp TopicPartition) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Delete removes a partition.
func (m *Manager) Delete(tp TopicPartition) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.logs, tp)
	return nil
}

// RunRetention runs one retention pass.
func (m *Manager) RunRetention() error { return nil }

// Close closes all logs.
func (m *Manager) Close() error { return nil }

// AppendOptions qualify an Append.
type AppendOptions struct {
	LeaderEpoch   int32 // stamped into each batch's PartitionLeaderEpoch field
	AssignOffsets bool  // true on a leader; false = follower replication
}

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset, LastOffset int64
	LogAppendTime          int64
	LogStartOffset         int64
	Duplicate              bool
}

// Log is one partition's log.
type Log struct {
	mu      sync.Mutex
	tp      TopicPartition
	cfg     Config
	clock   Clock
	batches [][]byte
	bases   []int64
	leo     int64
	hw      int64
	changed chan struct{}
}

// Append appends batches.
func (l *Log) Append(batches []byte, opts AppendOptions) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res := AppendResult{BaseOffset: l.leo, LogAppendTime: -1}
	var bs [][]byte
	for b := batches; len(b) > 0; {
		if len(b) < batchHeaderSize {
			return res, fmt.Errorf("%w: short", ErrCorruptBatch)
		}
		h := parseHeader(b)
		if h.size() > int64(len(b)) || h.Length < 49 {
			return res, fmt.Errorf("%w: length", ErrCorruptBatch)
		}
		one := b[:h.size()]
		if _, err := validateClientBatch(one, l.cfg.MaxMessageBytes); err != nil {
			return res, err
		}
		bs = append(bs, one)
		b = b[h.size():]
	}
	for _, b := range bs {
		h := parseHeader(b)
		setBaseOffset(b, l.leo)
		setLeaderEpoch(b, opts.LeaderEpoch)
		l.batches = append(l.batches, append([]byte(nil), b...))
		l.bases = append(l.bases, l.leo)
		l.leo += int64(h.LastOffsetDelta) + 1
	}
	res.LastOffset = l.leo - 1
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return res, nil
}

type memRegion struct{ b []byte }

func (r memRegion) Len() int64                         { return int64(len(r.b)) }
func (r memRegion) WriteTo(w io.Writer) (int64, error) { return io.Copy(w, bytes.NewReader(r.b)) }
func (r memRegion) Bytes() ([]byte, error)             { return r.b, nil }
func (r memRegion) Close() error                       { return nil }

// Region is a byte range of a segment.
type Region interface {
	Len() int64
	WriteTo(w io.Writer) (int64, error)
	Bytes() ([]byte, error)
	Close() error
}

// Read reads batches.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Region, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset < 0 || offset > l.leo {
		return nil, ErrOffsetOutOfRange
	}
	var out []byte
	for i, b := range l.batches {
		h := parseHeader(b)
		if h.lastOffset() < offset {
			continue
		}
		if l.bases[i] >= maxOffset || (len(out) > 0 && len(out)+len(b) > maxBytes) {
			break
		}
		out = append(out, b...)
	}
	return memRegion{out}, nil
}

// TopicPartition returns the partition.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// Config returns the config.
func (l *Log) Config() Config { return l.cfg }

// SetConfig sets the config.
func (l *Log) SetConfig(c Config) error { l.cfg = c; return nil }

// LogStartOffset returns the log start offset.
func (l *Log) LogStartOffset() int64 { return 0 }

// LogEndOffset returns the log end offset.
func (l *Log) LogEndOffset() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.leo }

// HighWatermark returns the high watermark.
func (l *Log) HighWatermark() int64 { l.mu.Lock(); defer l.mu.Unlock(); return l.hw }

// SetHighWatermark sets the HW.
func (l *Log) SetHighWatermark(o int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hw = o
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return nil
}

// Changed is closed at the next change.
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

// OffsetForTimestamp finds an offset by timestamp.
func (l *Log) OffsetForTimestamp(ts int64) (int64, int64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range l.batches {
		h := parseHeader(b)
		if h.MaxTimestamp >= ts {
			return l.bases[i], h.MaxTimestamp, true, nil
		}
	}
	return 0, 0, false, nil
}

// TruncateTo truncates.
func (l *Log) TruncateTo(offset int64) error { return nil }

// DeleteRecordsBefore deletes.
func (l *Log) DeleteRecordsBefore(offset int64) error { return nil }

// LatestEpoch returns the latest epoch.
func (l *Log) LatestEpoch() int32 { return -1 }

// EndOffsetForEpoch returns the end offset of an epoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (int64, int32) { return -1, -1 }

// Size returns the size.
func (l *Log) Size() int64 { return 0 }

// Flush flushes.
func (l *Log) Flush() error { return nil }

// Close closes.
func (l *Log) Close() error { return nil }
