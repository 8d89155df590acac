package replica

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Replication throttles (Kafka's leader.replication.throttled.rate and
// follower.replication.throttled.rate, KIP-73): a byte rate shared by the
// throttled replicas of one broker, on the leader's side (what it sends to
// out-of-sync followers) and on the follower's side (what it fetches while
// out of sync). Which replicas are throttled is the topics' business
// (Options.Throttled); in-sync replicas never are, nor are clients.
//
// A quota is a pacer: each throttled transfer of n bytes pushes the time the
// quota is next free by n/rate from the later of now and that time, and a
// throttled replica is left out (the leader sends it no records, the
// follower does not fetch it) while the quota is not free. Idle time is not
// banked, so over any interval T a quota passes at most rate*T bytes plus
// one fetch answer (the one that overdrew it).
type quota struct {
	mu   sync.Mutex
	rate int64     // bytes/s; <0 unlimited
	free time.Time // the quota is exceeded before this
}

func newQuota() *quota { return &quota{rate: -1} }

// set changes the rate (<0: unlimited); it takes effect at the next check.
func (q *quota) set(rate int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if rate != q.rate {
		q.rate, q.free = rate, time.Time{}
	}
}

// limited reports whether a rate is set.
func (q *quota) limited() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rate >= 0
}

// exceeded reports whether the quota is overdrawn at now, and until when.
func (q *quota) exceeded(now time.Time) (bool, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.rate < 0:
		return false, time.Time{}
	case q.rate == 0:
		return true, now.Add(time.Second) // nothing passes; look again later
	}
	return now.Before(q.free), q.free
}

// record charges n bytes of a throttled transfer at now.
func (q *quota) record(n int64, now time.Time) {
	if n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rate <= 0 {
		return
	}
	start := q.free
	if start.Before(now) {
		start = now
	}
	d := float64(n) / float64(q.rate) * float64(time.Second)
	q.free = start.Add(time.Duration(min(d, math.MaxInt64/2)))
}

// SetThrottleRates sets this broker's replication throttles in bytes/s:
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (negative: unlimited, Kafka's default).
func (m *Manager) SetThrottleRates(leader, follower int64) {
	m.leaderQuota.set(leader)
	m.followerQuota.set(follower)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.fetchers {
		f.poke() // a fetcher waiting on the old rate looks again
	}
}

// LeaderThrottle tells a leader serving a follower's fetch of a partition
// whether that answer is throttled: throttled when the partition's leader
// replica is in leader.replication.throttled.replicas, the follower is
// out of the ISR and the leader's rate is set; then skip says the quota is
// overdrawn (answer no records) until when. The bytes of a throttled
// answer are charged with RecordLeaderThrottled.
func (m *Manager) LeaderThrottle(topic string, partition, follower int32) (throttled, skip bool, until time.Time) {
	if !m.leaderQuota.limited() || m.opts.Throttled == nil {
		return false, false, time.Time{}
	}
	p := m.get(topic, partition)
	if p == nil {
		return false, false, time.Time{}
	}
	p.mu.Lock()
	inSync := p.leader && slices.Contains(p.isr, follower)
	p.mu.Unlock()
	if inSync || !m.opts.Throttled(topic, partition, true) {
		return false, false, time.Time{}
	}
	skip, until = m.leaderQuota.exceeded(m.clock.Now())
	return true, skip, until
}

// RecordLeaderThrottled charges the leader's quota with the record bytes
// of throttled answers (LeaderThrottle).
func (m *Manager) RecordLeaderThrottled(n int64) {
	m.leaderQuota.record(n, m.clock.Now())
	m.metrics.throttledBytes.WithLabelValues("leader").Add(float64(max(n, 0)))
}

// followerThrottledLocked reports whether p's fetches count against the
// follower quota: the follower's rate is set, p's replica here is in
// follower.replication.throttled.replicas and not in the ISR. The caller
// holds p.mu.
func (m *Manager) followerThrottledLocked(p *partition) bool {
	if !m.followerQuota.limited() || m.opts.Throttled == nil {
		return false
	}
	if slices.Contains(p.state.ISR, m.opts.BrokerID) {
		return false
	}
	return m.opts.Throttled(p.key.topic, p.key.partition, false)
}
