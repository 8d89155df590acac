package txn

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Description is one transactional id as DescribeTransactions and
// ListTransactions report it.
type Description struct {
	TransactionalID string
	State           kmsg.TransactionState
	ProducerID      int64
	ProducerEpoch   int16
	TimeoutMs       int32
	StartMs         int64 // -1: no transaction begun
	Partitions      []TopicPartition
}

func (t *transaction) describeLocked(withPartitions bool) Description {
	d := Description{TransactionalID: t.id, State: t.state, ProducerID: t.producerID, ProducerEpoch: t.epoch,
		TimeoutMs: t.timeoutMs, StartMs: t.startMs}
	if withPartitions {
		d.Partitions = t.sortedPartitions()
	}
	return d
}

// Describe returns the transactional id's state; ok is false if the id is
// unknown here.
func (c *Coordinator) Describe(id string) (d Description, ok bool, err error) {
	t, err := c.lookup(id, false)
	if err != nil || t == nil {
		return Description{}, false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.producerID < 0 {
		return Description{}, false, nil
	}
	return t.describeLocked(true), true, nil
}

// Filter selects transactions for List; zero fields select all.
type Filter struct {
	States      map[kmsg.TransactionState]bool
	ProducerIDs map[int64]bool
	MinDuration time.Duration // only transactions open at least this long (ListTransactions v1)
	Match       func(id string) bool
	Limit       int // at most this many (0: no limit)
}

// List returns the transactions f selects, by transactional id.
func (c *Coordinator) List(f Filter) []Description {
	now := c.clock.Now().UnixMilli()
	var out []Description
	for _, t := range c.all() {
		if _, ok := c.opts.Ownership.Owns(t.partition); !ok {
			continue
		}
		t.mu.Lock()
		d := t.describeLocked(false)
		t.mu.Unlock()
		switch {
		case d.ProducerID < 0:
		case len(f.States) > 0 && !f.States[d.State]:
		case len(f.ProducerIDs) > 0 && !f.ProducerIDs[d.ProducerID]:
		case f.MinDuration > 0 && (d.State != kmsg.TransactionStateOngoing || d.StartMs < 0 || now-d.StartMs < f.MinDuration.Milliseconds()):
		case f.Match != nil && !f.Match(d.TransactionalID):
		default:
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

// Stats is a snapshot of the coordinator for metrics.
type Stats struct {
	TransactionalIDs int           // ids held
	Open             int           // transactions Ongoing or being ended
	OldestOpen       time.Duration // age of the oldest open transaction (0: none)
	TimedOut         int64         // transactions aborted for their timeout since start
}

// Stats returns the current counts.
func (c *Coordinator) Stats() Stats {
	now := c.clock.Now().UnixMilli()
	st := Stats{TimedOut: c.timedOut.Load()}
	for _, t := range c.all() {
		st.TransactionalIDs++
		t.mu.Lock()
		if (t.state == kmsg.TransactionStateOngoing || preparing(t.state)) && t.startMs >= 0 {
			st.Open++
			st.OldestOpen = max(st.OldestOpen, time.Duration(now-t.startMs)*time.Millisecond)
		}
		t.mu.Unlock()
	}
	return st
}
