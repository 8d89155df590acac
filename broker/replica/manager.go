package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/internal/clock"
)

// State is what the controller decided for one partition: who leads, in
// which leader epoch, the in-sync replica set and the assigned replicas. It
// is a copy of cluster.PartitionState made by the server's adapter
// (broker/replica does not import broker/cluster).
type State struct {
	Topic       string
	Partition   int32
	Leader      int32 // -1: offline
	LeaderEpoch int32
	ISR         []int32
	Replicas    []int32
	Version     int32 // version of the state znode; AlterISR is conditional on it
}

// ErrStaleState is what an AlterISR implementation returns (wrapped or as
// is) when the version, leader or leader epoch moved: the leader then waits
// for the next Apply instead of retrying. Any other error is retried at the
// next ISR check.
var ErrStaleState = errors.New("replica: partition state changed")

// Options configure a Manager.
type Options struct {
	BrokerID int32
	// Log opens (or creates) this broker's log of a partition. The server's
	// partition log, so that its Fetch and Produce handlers see the same log.
	Log func(topic string, partition int32) (*plog.Log, error)
	// Addr returns the replication endpoint (host:port of its Kafka
	// listener) of a broker, false when the broker is not known to be live.
	Addr func(brokerID int32) (string, bool)
	// AlterISR writes a new ISR, conditional on version (the state's znode
	// version) and leaderEpoch; it returns the new version. A refused
	// write is ErrStaleState.
	AlterISR func(ctx context.Context, topic string, partition, leaderEpoch int32, isr []int32, version int32) (newVersion int32, err error)
	// MinInSync returns a topic's min.insync.replicas; nil = 1.
	MinInSync func(topic string) int
	// Throttled reports whether this broker's replica of a partition is in
	// the topic's leader.replication.throttled.replicas (leaderSide) or
	// follower.replication.throttled.replicas; nil = none is (throttle.go).
	Throttled func(topic string, partition int32, leaderSide bool) bool

	LagTimeMax    time.Duration // replica.lag.time.max.ms; 0 = 30 s
	FetchWaitMax  time.Duration // replica.fetch.wait.max.ms; 0 = 500 ms
	FetchMaxBytes int32         // replica.fetch.response.max.bytes; 0 = 10 MiB
	// FetchPartitionMaxBytes is replica.fetch.max.bytes; 0 = 1 MiB.
	FetchPartitionMaxBytes int32
	// FetchBackoff is replica.fetch.backoff.ms, the pause after a failed
	// fetch; 0 = 1 s.
	FetchBackoff time.Duration
	// RequestTimeout bounds one request of a fetcher to a leader
	// (replica.socket.timeout.ms); 0 = 30 s.
	RequestTimeout time.Duration

	Clock   clock.Clock  // nil = clock.Real: caught-up times, ISR checks, backoffs
	Logger  *slog.Logger // nil = slog.Default()
	Metrics prometheus.Registerer
}

func (o *Options) normalize() {
	if o.LagTimeMax <= 0 {
		o.LagTimeMax = 30 * time.Second
	}
	if o.FetchWaitMax <= 0 {
		o.FetchWaitMax = 500 * time.Millisecond
	}
	if o.FetchMaxBytes <= 0 {
		o.FetchMaxBytes = 10 << 20
	}
	if o.FetchPartitionMaxBytes <= 0 {
		o.FetchPartitionMaxBytes = 1 << 20
	}
	if o.FetchBackoff <= 0 {
		o.FetchBackoff = time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	o.Clock = clock.OrReal(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinInSync == nil {
		o.MinInSync = func(string) int { return 1 }
	}
}

type partitionKey struct {
	topic     string
	partition int32
}

// Manager is one broker's replication: for each partition with a replica
// here it plays the role Apply gave it — leader (follower states, the high
// watermark, ISR changes, acks=all) or follower (a fetcher pulling from the
// leader after truncating by leader epoch).
type Manager struct {
	opts    Options
	logger  *slog.Logger
	clock   clock.Clock
	metrics *metrics

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // fetchers, the ISR checker, ISR writes in flight

	applyMu sync.Mutex // serialises Apply

	// The replication throttles (throttle.go); each has its own lock, a leaf.
	leaderQuota, followerQuota *quota

	mu sync.Mutex // guards the fields below; taken before partition.mu, never after
	// Guarded by mu.
	parts    map[partitionKey]*partition
	fetchers map[int32]*fetcher // by source leader
	closed   bool
}

// New starts a Manager. It replicates nothing until Apply.
func New(opts Options) *Manager {
	opts.normalize()
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{opts: opts, logger: opts.Logger.With("broker", opts.BrokerID), clock: opts.Clock, ctx: ctx, cancel: cancel,
		parts: map[partitionKey]*partition{}, fetchers: map[int32]*fetcher{}, leaderQuota: newQuota(), followerQuota: newQuota()}
	m.metrics = newMetrics(m)
	if opts.Metrics != nil {
		if err := opts.Metrics.Register(m.metrics); err != nil {
			m.logger.Warn("replica metrics not registered", "err", err)
		}
	}
	m.wg.Add(1)
	go m.isrLoop()
	return m
}

// Collector returns the Manager's Prometheus metrics (MetricNames).
func (m *Manager) Collector() prometheus.Collector { return m.metrics }

// Apply makes this broker play the roles the states give it: a state naming
// this broker as leader makes it lead (from its log end, in that epoch); one
// naming another broker makes it follow that leader (truncating by leader
// epoch first); a state whose replicas do not include this broker stops
// its replication of the partition. A state older than the one applied
// (lower leader epoch, or the same epoch and a lower version) is ignored.
func (m *Manager) Apply(states []State) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	for _, st := range states {
		if err := m.applyOne(st); err != nil {
			m.logger.Error("apply partition state", "topic", st.Topic, "partition", st.Partition, "err", err)
		}
	}
}

func (m *Manager) applyOne(st State) error {
	key := partitionKey{st.Topic, st.Partition}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errors.New("replica: manager closed")
	}
	p := m.parts[key]
	m.mu.Unlock()
	if !slices.Contains(st.Replicas, m.opts.BrokerID) {
		if p != nil {
			m.stop(key, p)
		}
		return nil
	}
	if p == nil {
		l, err := m.opts.Log(st.Topic, st.Partition)
		if err != nil {
			return fmt.Errorf("open log: %w", err)
		}
		p = newPartition(key, l)
		m.mu.Lock()
		if old := m.parts[key]; old != nil {
			p = old
		} else {
			m.parts[key] = p
		}
		m.mu.Unlock()
	}
	return m.applyRole(p, st)
}

// applyRole moves p to the role st gives this broker.
func (m *Manager) applyRole(p *partition, st State) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.applied && (st.LeaderEpoch < p.state.LeaderEpoch || (st.LeaderEpoch == p.state.LeaderEpoch && st.Version < p.state.Version)) {
		return nil // older than what we know
	}
	sameEpoch := p.applied && st.LeaderEpoch == p.state.LeaderEpoch && st.Leader == p.state.Leader
	p.state = cloneState(st)
	p.applied = true
	p.alterStale = false // a new version: ISR changes may be tried again
	switch {
	case sameEpoch && p.leader:
		// Same term: only the ISR (ours, confirmed, or the controller's) or
		// the assignment (a move adds or drops replicas) moved.
		p.isr = slices.Clone(st.ISR)
		p.version = st.Version
		m.syncFollowersLocked(p, st.Replicas)
		p.notifyLocked()
		m.maybeIncrementHWLocked(p)
		return nil
	case sameEpoch:
		return nil // a follower (or offline) in the same term: nothing to redo
	case st.Leader == m.opts.BrokerID:
		m.unfollowLocked(p)
		return m.becomeLeaderLocked(p, st)
	default:
		m.unfollowLocked(p)
		p.leader = false
		p.epoch = st.LeaderEpoch
		p.isr, p.pendingISR = nil, nil
		p.followers = nil
		p.notifyLocked()
		if st.Leader >= 0 {
			m.followLocked(p, st.Leader)
		}
		m.logger.Info("following", "topic", p.key.topic, "partition", p.key.partition, "leader", st.Leader, "epoch", st.LeaderEpoch)
		return nil
	}
}

// stop ends this broker's replication of a partition it is no longer a
// replica of. Its log stays (deleting it is the topic's business).
func (m *Manager) stop(key partitionKey, p *partition) {
	p.mu.Lock()
	m.unfollowLocked(p)
	p.leader = false
	p.applied = false
	p.notifyLocked()
	p.mu.Unlock()
	m.mu.Lock()
	delete(m.parts, key)
	m.mu.Unlock()
}

// Role tells whether this broker leads the partition and in which epoch;
// ok is false when it is not a replica here (or no state was applied).
func (m *Manager) Role(topic string, partition int32) (leader bool, epoch int32, ok bool) {
	p := m.get(topic, partition)
	if p == nil {
		return false, -1, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.applied {
		return false, -1, false
	}
	return p.leader, p.epoch, true
}

// States returns the last applied state of every partition with a replica
// here, with the ISR this broker's leadership last confirmed.
func (m *Manager) States() []State {
	m.mu.Lock()
	ps := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	out := make([]State, 0, len(ps))
	for _, p := range ps {
		p.mu.Lock()
		if p.applied {
			st := cloneState(p.state)
			if p.leader {
				st.ISR, st.Version = slices.Clone(p.isr), p.version
			}
			out = append(out, st)
		}
		p.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b State) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// Holds reports whether the Manager replicates the partition (a state
// naming this broker among its replicas was applied and not stopped).
func (m *Manager) Holds(topic string, partition int32) bool { return m.get(topic, partition) != nil }

func (m *Manager) get(topic string, partition int32) *partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.parts[partitionKey{topic, partition}]
}

// Close stops the fetchers, the ISR checker and the ISR writes in flight.
// The logs stay open (they belong to the server).
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	for _, f := range m.fetchers {
		f.stop()
	}
	m.fetchers = map[int32]*fetcher{}
	ps := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	m.cancel()
	for _, p := range ps {
		p.mu.Lock()
		p.leader = false
		p.fetching = nil
		p.notifyLocked()
		p.mu.Unlock()
	}
	m.wg.Wait()
}

func cloneState(st State) State {
	st.ISR = slices.Clone(st.ISR)
	st.Replicas = slices.Clone(st.Replicas)
	return st
}
