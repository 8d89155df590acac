package replica

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	plog "github.com/sluicehq/sluice/broker/log"
)

// becomeLeaderLocked starts a leadership in st's epoch: every other replica
// starts with an unknown log end; ISR members count as caught up now (so a
// dead one leaves the ISR after LagTimeMax), the others never were.
func (m *Manager) becomeLeaderLocked(p *partition, st State) error {
	now := m.clock.Now()
	p.leader = true
	p.epoch = st.LeaderEpoch
	p.isr = slices.Clone(st.ISR)
	p.version = st.Version
	p.pendingISR = nil
	p.epochStart = p.log.LogEndOffset()
	p.followers = map[int32]*followerState{}
	for _, id := range st.Replicas {
		if id == m.opts.BrokerID {
			continue
		}
		f := &followerState{leo: -1, logStart: -1, lastFetchLeaderLEO: -1}
		if slices.Contains(st.ISR, id) {
			f.lastCaughtUp = now
		}
		p.followers[id] = f
	}
	p.notifyLocked()
	m.maybeIncrementHWLocked(p)
	m.logger.Info("leading", "topic", p.key.topic, "partition", p.key.partition, "epoch", p.epoch,
		"isr", p.isr, "log_end", p.epochStart, "high_watermark", p.log.HighWatermark())
	return nil
}

// syncFollowersLocked makes a leader track exactly the other replicas of
// replicas: a replica a move adds starts with an unknown log end and never
// caught up (it joins the ISR once it reaches the high watermark); one it
// removes is forgotten.
func (m *Manager) syncFollowersLocked(p *partition, replicas []int32) {
	for id := range p.followers {
		if !slices.Contains(replicas, id) {
			delete(p.followers, id)
		}
	}
	for _, id := range replicas {
		if id != m.opts.BrokerID && p.followers[id] == nil {
			p.followers[id] = &followerState{leo: -1, logStart: -1, lastFetchLeaderLEO: -1}
		}
	}
}

// LeaderCheck answers whether a request naming currentLeaderEpoch (-1: none)
// may be served by this broker as the partition's leader: 0, or
// NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH (the requester's epoch is
// older), UNKNOWN_LEADER_EPOCH (newer: this broker has not learnt it yet).
func (m *Manager) LeaderCheck(topic string, partition, currentLeaderEpoch int32) int16 {
	p := m.get(topic, partition)
	if p == nil {
		return kerr.NotLeaderForPartition.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leaderCheckLocked(currentLeaderEpoch)
}

func (p *partition) leaderCheckLocked(currentLeaderEpoch int32) int16 {
	switch {
	case currentLeaderEpoch >= 0 && currentLeaderEpoch < p.epoch:
		return kerr.FencedLeaderEpoch.Code
	case currentLeaderEpoch > p.epoch:
		return kerr.UnknownLeaderEpoch.Code
	case !p.applied || !p.leader:
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// FollowerFetched records a follower's fetch at fetchOffset (its log end):
// it updates the follower's state, may add it to the ISR (it reached the
// high watermark and this leadership's first offset) and advances the high
// watermark. It returns the high watermark to put in the answer.
func (m *Manager) FollowerFetched(topic string, partition int32, replicaID int32, fetchOffset int64, now time.Time) (hw int64, errCode int16) {
	return m.FollowerFetchedAt(topic, partition, replicaID, fetchOffset, -1, now)
}

// FollowerFetchedAt is FollowerFetched with the follower's log start as its
// fetch names it (-1: not given), which the low watermark (LowWatermark)
// is the minimum over.
func (m *Manager) FollowerFetchedAt(topic string, partition int32, replicaID int32, fetchOffset, logStart int64, now time.Time) (hw int64, errCode int16) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, kerr.NotLeaderForPartition.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.applied || !p.leader {
		return -1, kerr.NotLeaderForPartition.Code
	}
	f := p.followers[replicaID]
	if f == nil {
		return -1, kerr.ReplicaNotAvailable.Code // not an assigned replica
	}
	leo := p.log.LogEndOffset()
	// Kafka's Replica.updateFetchState: caught up when the fetch reaches the
	// log end now, or the log end of the previous fetch (then since then).
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = later(f.lastCaughtUp, now)
	case f.lastFetchLeaderLEO >= 0 && fetchOffset >= f.lastFetchLeaderLEO:
		f.lastCaughtUp = later(f.lastCaughtUp, f.lastFetch)
	}
	f.lastFetch, f.lastFetchLeaderLEO = now, leo
	if fetchOffset <= leo { // beyond it the follower diverged; it must truncate first
		f.leo = fetchOffset
	}
	if logStart >= 0 && logStart != f.logStart {
		f.logStart = logStart
		p.notifyLocked() // WaitLowWatermark
	}
	m.maybeExpandISRLocked(p, replicaID, f)
	m.maybeIncrementHWLocked(p)
	return p.log.HighWatermark(), 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// maybeExpandISRLocked proposes adding a follower outside the ISR once its
// log end reached the high watermark and the first offset of this
// leadership (so it holds everything this leader may have acknowledged).
func (m *Manager) maybeExpandISRLocked(p *partition, id int32, f *followerState) {
	if slices.Contains(p.isr, id) || p.pendingISR != nil || p.alterStale {
		return
	}
	if f.leo < p.log.HighWatermark() || f.leo < p.epochStart {
		return
	}
	isr := append(slices.Clone(p.isr), id)
	slices.Sort(isr)
	m.alterISRLocked(p, isr)
}

// maybeShrinkISRLocked proposes removing the ISR members that have not
// caught up with the log end for LagTimeMax.
func (m *Manager) maybeShrinkISRLocked(p *partition, now time.Time) {
	if !p.leader || p.pendingISR != nil || p.alterStale {
		return
	}
	leo := p.log.LogEndOffset()
	var keep []int32
	shrink := false
	for _, id := range p.isr {
		if id == m.opts.BrokerID {
			keep = append(keep, id)
			continue
		}
		f := p.followers[id]
		if f != nil && (f.leo == leo || now.Sub(f.lastCaughtUp) <= m.opts.LagTimeMax) {
			keep = append(keep, id)
			continue
		}
		shrink = true
		m.logger.Info("follower out of sync", "topic", p.key.topic, "partition", p.key.partition, "follower", id,
			"follower_log_end", followerLEO(f), "log_end", leo, "lag_time_max", m.opts.LagTimeMax)
	}
	if shrink {
		m.alterISRLocked(p, keep)
	}
}

func followerLEO(f *followerState) int64 {
	if f == nil {
		return -1
	}
	return f.leo
}

// alterISRLocked writes isr through Options.AlterISR in the background,
// conditional on the confirmed version. Until it returns, the high
// watermark counts the union of both ISRs.
func (m *Manager) alterISRLocked(p *partition, isr []int32) {
	if m.opts.AlterISR == nil || m.ctx.Err() != nil {
		return
	}
	p.pendingISR = isr
	epoch, version, old := p.epoch, p.version, slices.Clone(p.isr)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, m.opts.RequestTimeout)
		nv, err := m.opts.AlterISR(ctx, p.key.topic, p.key.partition, epoch, isr, version)
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.leader || p.epoch != epoch {
			return // another term; its own state holds
		}
		p.pendingISR = nil
		switch {
		case err == nil:
			if nv > p.version { // else the new state was applied already
				p.isr, p.version = isr, nv
			}
			if len(isr) < len(old) {
				m.metrics.isrShrinks.Inc()
			} else {
				m.metrics.isrExpands.Inc()
			}
			m.logger.Info("ISR changed", "topic", p.key.topic, "partition", p.key.partition, "from", old, "to", isr, "version", nv)
		case errors.Is(err, ErrStaleState):
			if p.version == version {
				p.alterStale = true // the next Apply brings the state that won
			}
			m.logger.Info("ISR change refused; waiting for the new state", "topic", p.key.topic, "partition", p.key.partition, "isr", isr, "err", err)
		default:
			m.logger.Warn("ISR change failed; retried at the next check", "topic", p.key.topic, "partition", p.key.partition, "isr", isr, "err", err)
		}
		p.notifyLocked()
		m.maybeIncrementHWLocked(p)
	}()
}

// maybeIncrementHWLocked moves the high watermark up to the smallest log
// end over the ISR (never down).
func (m *Manager) maybeIncrementHWLocked(p *partition) {
	if !p.leader {
		return
	}
	leo := p.log.LogEndOffset()
	hw := leo
	for _, id := range p.hwISRLocked() {
		if id == m.opts.BrokerID {
			continue
		}
		f := p.followers[id]
		if f == nil || f.leo < 0 {
			return // an ISR member whose log end is unknown: wait for its fetch
		}
		hw = min(hw, f.leo)
	}
	if hw > p.log.HighWatermark() {
		if err := p.log.SetHighWatermark(hw); err != nil {
			m.logger.Warn("set high watermark", "topic", p.key.topic, "partition", p.key.partition, "hw", hw, "err", err)
		}
	}
}

// isrLoop checks the leaders' ISRs every LagTimeMax/2 (Kafka's
// isr-expiration task).
func (m *Manager) isrLoop() {
	defer m.wg.Done()
	every := max(m.opts.LagTimeMax/2, time.Millisecond)
	t := m.clock.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C():
		}
		now := m.clock.Now()
		for _, p := range m.partitions() {
			p.mu.Lock()
			m.maybeShrinkISRLocked(p, now)
			p.mu.Unlock()
		}
		t.Reset(every)
	}
}

func (m *Manager) partitions() []*partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := make([]*partition, 0, len(m.parts))
	for _, p := range m.parts {
		ps = append(ps, p)
	}
	return ps
}

// CheckProduce answers whether a produce with acks may be appended here:
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (acks=-1 and the ISR is
// smaller than min.insync.replicas) or 0.
func (m *Manager) CheckProduce(topic string, partition int32, acks int16) (errCode int16) {
	p := m.get(topic, partition)
	if p == nil {
		return kerr.NotLeaderForPartition.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return m.checkProduceLocked(p, acks)
}

func (m *Manager) checkProduceLocked(p *partition, acks int16) int16 {
	if !p.applied || !p.leader {
		return kerr.NotLeaderForPartition.Code
	}
	if acks == -1 && len(p.isr) < m.opts.MinInSync(p.key.topic) {
		return kerr.NotEnoughReplicas.Code
	}
	return 0
}

// Appended is a leader append: its result and the leader epoch it was
// appended in (for WaitAppended).
type Appended struct {
	plog.AppendResult
	Epoch int32
}

// AppendLeader checks the produce as CheckProduce does and appends the
// batches in the current leader epoch, atomically with the check (a role
// change waits for it). errCode is a Kafka code for a refusal; err an
// append error (the caller maps it as for a single node).
func (m *Manager) AppendLeader(topic string, partition int32, acks int16, batches []byte, opts plog.AppendOptions) (res Appended, errCode int16, err error) {
	return m.AppendLeaderInEpoch(topic, partition, -1, acks, batches, opts)
}

// AppendLeaderInEpoch is AppendLeader that appends only while this broker
// leads in leader epoch epoch (-1: any), else NOT_LEADER_OR_FOLLOWER: a
// group coordinator's appends, bound to the leadership it loaded its
// groups in.
func (m *Manager) AppendLeaderInEpoch(topic string, partition, epoch int32, acks int16, batches []byte, opts plog.AppendOptions) (res Appended, errCode int16, err error) {
	p := m.get(topic, partition)
	if p == nil {
		return res, kerr.NotLeaderForPartition.Code, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if code := m.checkProduceLocked(p, acks); code != 0 {
		return res, code, nil
	}
	if epoch >= 0 && p.epoch != epoch {
		return res, kerr.NotLeaderForPartition.Code, nil
	}
	opts.LeaderEpoch, opts.AssignOffsets = p.epoch, true
	res.AppendResult, err = p.log.Append(batches, opts)
	res.Epoch = p.epoch
	if err == nil {
		m.maybeIncrementHWLocked(p)
	}
	return res, 0, err
}

// WaitReplicated waits until the high watermark passes lastOffset in the
// current leader epoch (acks=-1). See WaitAppended.
func (m *Manager) WaitReplicated(ctx context.Context, topic string, partition int32, lastOffset int64) (errCode int16) {
	_, epoch, ok := m.Role(topic, partition)
	if !ok {
		return kerr.NotLeaderForPartition.Code
	}
	return m.WaitAppended(ctx, topic, partition, epoch, lastOffset, 0)
}

// WaitAppended waits until the high watermark passes lastOffset while this
// broker still leads in epoch (so the offset still holds what was
// appended). It returns 0, NOT_ENOUGH_REPLICAS_AFTER_APPEND (replicated, but
// the ISR shrank below min.insync.replicas meanwhile), NOT_LEADER_OR_FOLLOWER
// (the leadership ended: the record may be lost, the client retries) or
// REQUEST_TIMED_OUT (ctx ended or timeout > 0 passed on the Manager's clock).
func (m *Manager) WaitAppended(ctx context.Context, topic string, partition, epoch int32, lastOffset int64, timeout time.Duration) (errCode int16) {
	p := m.get(topic, partition)
	if p == nil {
		return kerr.NotLeaderForPartition.Code
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := m.clock.NewTimer(timeout)
		defer t.Stop()
		timer = t.C()
	}
	for {
		logChanged := p.log.Changed()
		p.mu.Lock()
		if !p.leader || p.epoch != epoch {
			p.mu.Unlock()
			return kerr.NotLeaderForPartition.Code
		}
		if p.log.HighWatermark() > lastOffset {
			short := len(p.isr) < m.opts.MinInSync(p.key.topic)
			p.mu.Unlock()
			if short {
				return kerr.NotEnoughReplicasAfterAppend.Code
			}
			return 0
		}
		roleChanged := p.changed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code
		case <-m.ctx.Done():
			return kerr.NotLeaderForPartition.Code
		case <-timer:
			return kerr.RequestTimedOut.Code
		case <-logChanged:
		case <-roleChanged:
		}
	}
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch as the partition's leader:
// the end offset of the largest epoch at or below epoch in this leader's log
// and that epoch. This leadership's own epoch counts as started at its
// first offset even before anything was appended in it (Kafka assigns it in
// the epoch cache when the leadership starts), so a follower asking for an
// epoch this leader never wrote in is answered with the leader's newest
// epoch and its log end.
func (m *Manager) EndOffsetForEpoch(topic string, partition, currentLeaderEpoch, epoch int32) (endOffset int64, leaderEpoch int32, errCode int16) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, -1, kerr.NotLeaderForPartition.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if code := p.leaderCheckLocked(currentLeaderEpoch); code != 0 {
		return -1, -1, code
	}
	if epoch < 0 {
		return -1, -1, 0
	}
	if epoch >= p.epoch {
		return p.log.LogEndOffset(), p.epoch, 0
	}
	off, e := p.log.EndOffsetForEpoch(epoch)
	if e >= 0 {
		return off, e, 0
	}
	// epoch is above every epoch of the log but below this leadership's.
	latest := p.log.LatestEpoch()
	if latest < 0 {
		return p.epochStart, epoch, 0
	}
	return p.epochStart, latest, 0
}

// LowWatermark is a leader's low watermark of a partition (Kafka's
// lowWatermarkIfLeader): the smallest log start over its own log and its
// in-sync followers' as their fetches last said (a follower not heard from
// yet counts as -1). errCode is NOT_LEADER_OR_FOLLOWER when this broker
// does not lead it.
func (m *Manager) LowWatermark(topic string, partition int32) (lw int64, errCode int16) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, kerr.NotLeaderForPartition.Code
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.applied || !p.leader {
		return -1, kerr.NotLeaderForPartition.Code
	}
	return p.lowWatermarkLocked(m.opts.BrokerID), 0
}

func (p *partition) lowWatermarkLocked(self int32) int64 {
	lw := p.log.LogStartOffset()
	for _, id := range p.isr {
		if id == self {
			continue
		}
		f := p.followers[id]
		if f == nil {
			return -1
		}
		lw = min(lw, f.logStart)
	}
	return lw
}

// WaitLowWatermark waits until the low watermark of a partition this
// broker leads reaches offset (DeleteRecords: Kafka's delayed
// DeleteRecords), at most timeout on the Manager's clock. It returns the
// low watermark and 0, REQUEST_TIMED_OUT (ctx ended or timeout passed; lw
// is the low watermark then) or NOT_LEADER_OR_FOLLOWER.
func (m *Manager) WaitLowWatermark(ctx context.Context, topic string, partition int32, offset int64, timeout time.Duration) (lw int64, errCode int16) {
	p := m.get(topic, partition)
	if p == nil {
		return -1, kerr.NotLeaderForPartition.Code
	}
	t := m.clock.NewTimer(timeout)
	defer t.Stop()
	for {
		p.mu.Lock()
		if !p.applied || !p.leader {
			p.mu.Unlock()
			return -1, kerr.NotLeaderForPartition.Code
		}
		lw = p.lowWatermarkLocked(m.opts.BrokerID)
		changed := p.changed
		p.mu.Unlock()
		if lw >= offset {
			return lw, 0
		}
		select {
		case <-ctx.Done():
			return lw, kerr.RequestTimedOut.Code
		case <-m.ctx.Done():
			return lw, kerr.NotLeaderForPartition.Code
		case <-t.C():
			return lw, kerr.RequestTimedOut.Code
		case <-changed:
		}
	}
}
