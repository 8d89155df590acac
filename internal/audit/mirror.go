package audit

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Mirror is the mirror tier of one mirror: the records it copied per
// (topic, window), published to the target's _audit in the same
// transaction as the copies. Its counts are cumulative per key, and the
// key's origin names the mirror and the source cluster
// ("NAME/SOURCE-CLUSTER-ID"), the same for every instance of the mirror:
// a session starts from the counts committed in the target's _audit
// (Restore, read with read_committed after the fencing aborted the last
// instance's open transaction), so what an aborted transaction copied is
// neither in the target nor in the counts, and a kill -9 never double
// counts. It is used by one goroutine (the mirror's copy loop).
//
// It keeps every (topic, window) count of its origin in memory (a late
// record adds to its window's count, and the key's latest record must
// carry the whole count), at most MaxCells of them: past that, the
// records of new windows are not counted (Dropped, logged by the mirror)
// and show as the mirror tier's shortfall.
type Mirror struct {
	origin    string
	window    time.Duration
	committed map[cellKey]*Count
	pending   map[cellKey]*Count // the open transaction's additions
	dropped   int64
	part      kgo.TopicPartitioner
}

// MirrorOrigin is the origin of a mirror's counts.
func MirrorOrigin(name, sourceCluster string) string { return name + "/" + sourceCluster }

// NewMirror returns an empty mirror tier (0 window: DefaultWindow).
func NewMirror(origin string, window time.Duration) (*Mirror, error) {
	if window == 0 {
		window = DefaultWindow
	}
	if window < time.Millisecond || window%time.Millisecond != 0 {
		return nil, fmt.Errorf("audit: window %s: must be whole milliseconds, at least 1ms", window)
	}
	return &Mirror{origin: origin, window: window, committed: map[cellKey]*Count{}, pending: map[cellKey]*Count{},
		part: kgo.StickyKeyPartitioner(nil).ForTopic(Topic)}, nil
}

// Restore starts the counts from counts (the target's _audit), keeping
// the mirror tier's of this origin. A count of another window width is
// an error: the mirror's --audit-window must not change.
func (m *Mirror) Restore(counts []Count) error {
	m.committed, m.pending = map[cellKey]*Count{}, map[cellKey]*Count{}
	for _, c := range counts {
		if c.Tier != TierMirror || c.Origin != m.origin {
			continue
		}
		if c.WindowMs != m.window.Milliseconds() {
			return fmt.Errorf("audit: the mirror's counts in %s come in windows of %dms, not --audit-window %s: keep the window", Topic, c.WindowMs, m.window)
		}
		c := c
		m.committed[cellKey{c.Topic, c.WindowStart}] = &c
	}
	return nil
}

// Copied counts one record added to the open transaction.
func (m *Mirror) Copied(r *kgo.Record) {
	ts := r.Timestamp
	if ts.IsZero() || ts.UnixMilli() < 0 {
		ts = time.UnixMilli(-1)
	}
	k := cellKey{r.Topic, WindowStart(ts, m.window)}
	c := m.pending[k]
	if c == nil {
		if len(m.committed)+len(m.pending) >= MaxCells && m.committed[k] == nil {
			m.dropped++
			return
		}
		c = &Count{}
		m.pending[k] = c
	}
	c.Messages++
	c.Bytes += int64(len(r.Key) + len(r.Value))
}

// Records returns the _audit records of the open transaction: the new
// cumulative count of every window it added to, on the partition of
// _audit (of partitions) its key hashes to.
func (m *Mirror) Records(now time.Time, partitions int) ([]*kgo.Record, error) {
	out := make([]*kgo.Record, 0, len(m.pending))
	for k, d := range m.pending {
		c := Count{Version: FormatVersion, Tier: TierMirror, Topic: k.topic, WindowStart: k.start,
			WindowMs: m.window.Milliseconds(), Origin: m.origin}
		if old := m.committed[k]; old != nil {
			c.Messages, c.Bytes = old.Messages, old.Bytes
		}
		c.Messages += d.Messages
		c.Bytes += d.Bytes
		c.Updated = now.UTC()
		v, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		r := &kgo.Record{Topic: Topic, Key: []byte(c.Key()), Value: v, Timestamp: c.Updated}
		r.Partition = int32(m.part.Partition(r, max(partitions, 1)))
		out = append(out, r)
	}
	return out, nil
}

// Ended ends the open transaction: its counts become committed, or are
// dropped with it.
func (m *Mirror) Ended(committed bool) {
	if committed {
		for k, d := range m.pending {
			c := m.committed[k]
			if c == nil {
				c = &Count{Version: FormatVersion, Tier: TierMirror, Topic: k.topic, WindowStart: k.start,
					WindowMs: m.window.Milliseconds(), Origin: m.origin}
				m.committed[k] = c
			}
			c.Messages += d.Messages
			c.Bytes += d.Bytes
		}
	}
	clear(m.pending)
}

// Dropped returns the records not counted (MaxCells windows).
func (m *Mirror) Dropped() int64 { return m.dropped }

// Window returns the tier's window width.
func (m *Mirror) Window() time.Duration { return m.window }
