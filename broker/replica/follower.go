package replica

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
)

// Wire versions the fetchers send (served by sluice's server and by Kafka).
const (
	fetchVersion                = 12
	offsetForLeaderEpochVersion = 4
)

// followLocked assigns p to the fetcher of leader. It fetches at once: its
// first Fetch names the log's latest epoch (KIP-320's last_fetched_epoch),
// and a log that diverged from the leader's is answered with the leader's
// end of that epoch and cut there (applyFetched), without an
// OffsetForLeaderEpoch round trip.
func (m *Manager) followLocked(p *partition, leader int32) {
	p.fetching = &fetchAssignment{leader: leader, epoch: p.epoch, gen: nextGen()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		p.fetching = nil
		return
	}
	f := m.fetchers[leader]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[leader] = f
		m.wg.Add(1)
		go f.run()
	}
	f.add(p)
}

// unfollowLocked takes p out of its fetcher (stopping the fetcher when it has
// no partition left). An answer in flight for p is dropped (gen check).
func (m *Manager) unfollowLocked(p *partition) {
	if p.fetching == nil {
		return
	}
	leader := p.fetching.leader
	p.fetching = nil
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.fetchers[leader]; f != nil && f.remove(p.key) == 0 {
		f.stop()
		delete(m.fetchers, leader)
	}
}

// fetcher is the goroutine that replicates every partition this broker
// follows from one leader (Kafka's ReplicaFetcherThread).
type fetcher struct {
	m      *Manager
	leader int32
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // a partition was added

	mu      sync.Mutex // guards parts and delayed; taken after partition.mu and Manager.mu, never before
	parts   map[partitionKey]*partition
	delayed map[partitionKey]time.Time // partitions left out of rounds until then (Kafka's delayed partitions)

	conn *brokerConn // owned by the goroutine
}

func newFetcher(m *Manager, leader int32) *fetcher {
	ctx, cancel := context.WithCancel(m.ctx)
	return &fetcher{m: m, leader: leader, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		parts: map[partitionKey]*partition{}, delayed: map[partitionKey]time.Time{}}
}

func (f *fetcher) add(p *partition) {
	f.mu.Lock()
	f.parts[p.key] = p
	delete(f.delayed, p.key) // a new role starts undelayed
	f.mu.Unlock()
	f.poke()
}

// poke wakes an idle fetcher to look at its partitions again.
func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// remove returns how many partitions are left.
func (f *fetcher) remove(key partitionKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.parts, key)
	delete(f.delayed, key)
	return len(f.parts)
}

// delay leaves the partitions out of rounds for one FetchBackoff: a
// partition-level error backs off that partition only, while the others go
// on being fetched.
func (f *fetcher) delay(keys []partitionKey) {
	if len(keys) == 0 {
		return
	}
	until := f.m.clock.Now().Add(f.m.opts.FetchBackoff)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		if _, ok := f.parts[k]; ok {
			f.delayed[k] = until
		}
	}
}

func (f *fetcher) stop() { f.cancel() }

// work is one partition's part of a fetcher round, read under its mutex.
type work struct {
	p           *partition
	a           fetchAssignment
	fetchOffset int64
	latestEpoch int32
	logStart    int64 // sent to the leader (its low watermark, DeleteRecords)
	throttled   bool  // its bytes count against the follower throttle
}

// snapshot lists the partitions of the next round: those not delayed, nor
// throttled while the follower throttle is overdrawn. When some are left
// out, next is the earliest time one of them may come back.
func (f *fetcher) snapshot() (ws []work, next time.Time) {
	now := f.m.clock.Now()
	f.mu.Lock()
	ps := make([]*partition, 0, len(f.parts))
	for k, p := range f.parts {
		if until, ok := f.delayed[k]; ok {
			if now.Before(until) {
				if next.IsZero() || until.Before(next) {
					next = until
				}
				continue
			}
			delete(f.delayed, k)
		}
		ps = append(ps, p)
	}
	f.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].key.topic != ps[j].key.topic {
			return ps[i].key.topic < ps[j].key.topic
		}
		return ps[i].key.partition < ps[j].key.partition
	})
	over, until := f.m.followerQuota.exceeded(now)
	for _, p := range ps {
		p.mu.Lock()
		if a := p.fetching; a != nil && a.leader == f.leader {
			throttled := !a.truncating && f.m.followerThrottledLocked(p)
			if throttled && over {
				if next.IsZero() || until.Before(next) {
					next = until
				}
			} else {
				ws = append(ws, work{p: p, a: *a, fetchOffset: p.log.LogEndOffset(), latestEpoch: p.log.LatestEpoch(),
					logStart: p.log.LogStartOffset(), throttled: throttled})
			}
		}
		p.mu.Unlock()
	}
	return ws, next
}

func (f *fetcher) run() {
	defer f.m.wg.Done()
	defer func() {
		if f.conn != nil {
			f.conn.close()
		}
	}()
	log := f.m.logger.With("leader", f.leader)
	for f.ctx.Err() == nil {
		ws, next := f.snapshot()
		if len(ws) == 0 {
			f.idle(next)
			continue
		}
		if err := f.round(ws); err != nil {
			if f.ctx.Err() != nil {
				return
			}
			log.Warn("replica fetch failed; backing off", "err", err, "backoff", f.m.opts.FetchBackoff)
			if f.conn != nil {
				f.conn.close()
				f.conn = nil
			}
			f.backoff()
		}
	}
}

func (f *fetcher) backoff() {
	t := f.m.clock.NewTimer(f.m.opts.FetchBackoff)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
	case <-t.C():
	}
}

// idle waits for a partition to be added or, when next is set, for the
// first delayed partition's delay to end.
func (f *fetcher) idle(next time.Time) {
	var timeout <-chan time.Time
	if !next.IsZero() {
		t := f.m.clock.NewTimer(next.Sub(f.m.clock.Now()))
		defer t.Stop()
		timeout = t.C()
	}
	select {
	case <-f.ctx.Done():
	case <-f.wake:
	case <-timeout:
	}
}

// round truncates the partitions that must, else fetches the others once.
// A partition-level error delays that partition only (delay), without
// dropping the connection; a request-level error backs the fetcher off.
func (f *fetcher) round(ws []work) error {
	if f.conn == nil {
		addr, ok := f.m.opts.Addr(f.leader)
		if !ok {
			return fmt.Errorf("no address for broker %d", f.leader)
		}
		c, err := dialBroker(f.ctx, addr, fmt.Sprintf("sluice-replica-%d", f.m.opts.BrokerID),
			int(f.m.opts.FetchMaxBytes)*2+16<<20, f.m.opts.RequestTimeout)
		if err != nil {
			return err
		}
		f.conn = c
	}
	var trunc, fetch []work
	for _, w := range ws {
		if w.a.truncating {
			trunc = append(trunc, w)
		} else {
			fetch = append(fetch, w)
		}
	}
	var delayed []partitionKey
	var err error
	if len(trunc) > 0 {
		delayed, err = f.truncate(trunc)
	} else {
		delayed, err = f.fetch(fetch)
	}
	if err != nil {
		return err
	}
	f.delay(delayed)
	return nil
}

// truncate asks the leader for the end of each partition's latest epoch
// and cuts the log where it diverges (KIP-101), again with the next epoch
// down while the leader's answer is an older epoch than asked (KIP-279).
// Used after OFFSET_OUT_OF_RANGE or a refused append; a new role fetches at
// once (followLocked). It returns the partitions to delay.
func (f *fetcher) truncate(ws []work) (delayed []partitionKey, err error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(offsetForLeaderEpochVersion)
	req.ReplicaID = f.m.opts.BrokerID
	var done []work
	for _, w := range ws {
		if w.latestEpoch < 0 {
			// Nothing with an epoch here (an empty log): nothing can diverge.
			done = append(done, w)
			continue
		}
		t := topicOf(&req.Topics, w.p.key.topic)
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = w.p.key.partition, w.a.epoch, w.latestEpoch
		t.Partitions = append(t.Partitions, rp)
	}
	for _, w := range done {
		f.finishTruncation(w, -1)
	}
	if len(req.Topics) == 0 {
		return nil, nil
	}
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	f.m.metrics.epochRequests.Inc()
	if err := f.conn.do(f.ctx, req, resp, f.m.opts.RequestTimeout); err != nil {
		return nil, err
	}
	byKey := map[partitionKey]work{}
	for _, w := range ws {
		byKey[w.p.key] = w
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			w, ok := byKey[partitionKey{rt.Topic, rp.Partition}]
			if !ok {
				continue
			}
			if rp.ErrorCode != 0 || rp.EndOffset < 0 {
				f.m.logger.Info("leader cannot answer for epoch yet; retrying", "topic", rt.Topic, "partition", rp.Partition,
					"leader", f.leader, "epoch", w.latestEpoch, "err", kerr.ErrorForCode(rp.ErrorCode), "end_offset", rp.EndOffset)
				delayed = append(delayed, w.p.key)
				continue
			}
			if !f.applyEpochAnswer(w, rp.LeaderEpoch, rp.EndOffset) {
				delayed = append(delayed, w.p.key)
			}
		}
	}
	return delayed, nil
}

// applyEpochAnswer cuts the log after the leader answered (leaderEpoch,
// endOffset) for the follower's latest epoch. It returns false when the cut
// failed (the partition waits, as after an error answer).
func (f *fetcher) applyEpochAnswer(w work, leaderEpoch int32, endOffset int64) bool {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fetching == nil || p.fetching.gen != w.a.gen || !p.fetching.truncating {
		return true
	}
	complete, err := f.cutLocked(w, leaderEpoch, endOffset)
	if complete {
		p.fetching.truncating = false
	}
	return err == nil
}

// cutLocked cuts p's log where it diverges from the leader's, given the
// leader's end offset of leaderEpoch, its answer for the follower's latest
// epoch (OffsetForLeaderEpoch, or a Fetch's diverging epoch). It returns
// complete false when the cut may not be final: the leader's epoch is older
// than asked and the log holds an older epoch than it (KIP-279), so the next
// answer, for the epoch below, decides; err when the cut failed. The caller
// holds p.mu.
func (f *fetcher) cutLocked(w work, leaderEpoch int32, endOffset int64) (complete bool, err error) {
	p := w.p
	to := endOffset
	complete = true
	if leaderEpoch != w.latestEpoch {
		// The leader does not have our latest epoch: our end of its epoch.
		ownEnd, ownEpoch := p.log.EndOffsetForEpoch(leaderEpoch)
		switch {
		case ownEpoch == leaderEpoch:
			to = min(endOffset, ownEnd)
		case ownEnd >= 0:
			to, complete = ownEnd, false // KIP-279: ask again for the epoch below
		}
	}
	leo, hw := p.log.LogEndOffset(), p.log.HighWatermark()
	if to < leo {
		if to < hw {
			f.m.logger.Warn("truncating below the high watermark", "topic", p.key.topic, "partition", p.key.partition, "to", to, "high_watermark", hw)
		}
		if err := p.log.TruncateTo(to); err != nil {
			f.m.logger.Error("truncate", "topic", p.key.topic, "partition", p.key.partition, "to", to, "err", err)
			return false, err
		}
		f.m.metrics.truncations.Inc()
		f.m.logger.Info("truncated", "topic", p.key.topic, "partition", p.key.partition, "from", leo, "to", p.log.LogEndOffset(),
			"leader", f.leader, "leader_epoch", leaderEpoch, "complete", complete)
	}
	return complete, nil
}

func (f *fetcher) finishTruncation(w work, _ int64) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	if w.p.fetching != nil && w.p.fetching.gen == w.a.gen {
		w.p.fetching.truncating = false
	}
}

// fetch sends one Fetch for every partition and appends what comes back.
// It returns the partitions to delay.
func (f *fetcher) fetch(ws []work) (delayed []partitionKey, err error) {
	opts := &f.m.opts
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(fetchVersion)
	req.ReplicaID = opts.BrokerID
	req.MaxWaitMillis = int32(opts.FetchWaitMax.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = opts.FetchMaxBytes
	req.SessionID, req.SessionEpoch = 0, -1
	for _, w := range ws {
		t := fetchTopicOf(&req.Topics, w.p.key.topic)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = w.p.key.partition, w.a.epoch, w.fetchOffset
		rp.LastFetchedEpoch, rp.LogStartOffset, rp.PartitionMaxBytes = w.latestEpoch, w.logStart, opts.FetchPartitionMaxBytes
		t.Partitions = append(t.Partitions, rp)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if err := f.conn.do(f.ctx, req, resp, opts.RequestTimeout+opts.FetchWaitMax); err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("fetch: %w", kerr.ErrorForCode(resp.ErrorCode))
	}
	byKey := map[partitionKey]work{}
	for _, w := range ws {
		byKey[w.p.key] = w
	}
	var throttledBytes int64
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			w, ok := byKey[partitionKey{rt.Topic, rp.Partition}]
			if !ok {
				continue
			}
			if w.throttled {
				throttledBytes += int64(len(rp.RecordBatches))
			}
			if !f.applyFetched(w, &rp) {
				delayed = append(delayed, w.p.key)
			}
		}
	}
	if throttledBytes > 0 {
		f.m.followerQuota.record(throttledBytes, f.m.clock.Now())
		f.m.metrics.throttledBytes.WithLabelValues("follower").Add(float64(throttledBytes))
	}
	return delayed, nil
}

// applyFetched appends one partition's answer, keeping the leader's offsets
// and epochs, and raises the high watermark to min(leader's, own log end).
// It raises the log start to the leader's (at most to the high
// watermark). An answer with a diverging epoch (KIP-320: the log's latest
// epoch ends earlier at the leader, or is not the leader's) cuts the log
// there instead.
// It returns false when the partition must wait (an error answer).
func (f *fetcher) applyFetched(w work, rp *kmsg.FetchResponseTopicPartition) bool {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fetching == nil || p.fetching.gen != w.a.gen || p.fetching.truncating {
		return true // reassigned meanwhile
	}
	switch rp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		if ls := rp.LogStartOffset; ls > w.fetchOffset && p.log.LogEndOffset() == w.fetchOffset {
			// Our log ends below the leader's log start (DeleteRecords or
			// retention while we were away): nothing we hold is the
			// leader's any more, and no cut brings the fetch offset in
			// range. Restart the log at the leader's log start.
			f.m.logger.Warn("log end below the leader's log start; restarting the log there", "topic", p.key.topic,
				"partition", p.key.partition, "log_end", w.fetchOffset, "leader_log_start", ls)
			if err := p.log.TruncateFullyAndStartAt(ls); err != nil {
				f.m.logger.Error("restart the log", "topic", p.key.topic, "partition", p.key.partition, "at", ls, "err", err)
				return false
			}
			f.m.metrics.truncations.Inc()
			return true
		}
		f.m.logger.Warn("fetch offset out of range at the leader; truncating again", "topic", p.key.topic, "partition", p.key.partition,
			"fetch_offset", w.fetchOffset, "leader_log_start", rp.LogStartOffset, "leader_hw", rp.HighWatermark)
		p.fetching.truncating = true
		return false
	default:
		f.m.logger.Debug("replica fetch refused", "topic", p.key.topic, "partition", p.key.partition, "leader", f.leader,
			"err", kerr.ErrorForCode(rp.ErrorCode))
		return false
	}
	if p.log.LogEndOffset() != w.fetchOffset {
		return true // the log moved since the request; fetch again from its end
	}
	if d := rp.DivergingEpoch; d.Epoch >= 0 && d.EndOffset >= 0 {
		f.m.metrics.divergingEpochs.Inc()
		// Not final (KIP-279) is fine: the next Fetch names the new latest
		// epoch and is answered again. A failed cut waits, or the leader
		// would be asked again at once for the same answer.
		_, err := f.cutLocked(w, d.Epoch, d.EndOffset)
		return err == nil
	}
	if n := len(rp.RecordBatches); n > 0 {
		if _, err := p.log.Append(rp.RecordBatches, appendFollower); err != nil {
			f.m.logger.Warn("replica append failed; truncating again", "topic", p.key.topic, "partition", p.key.partition,
				"fetch_offset", w.fetchOffset, "err", err)
			p.fetching.truncating = true
			return false
		}
		f.m.metrics.fetchedBytes.Add(float64(n))
	}
	if hw := min(rp.HighWatermark, p.log.LogEndOffset()); hw > p.log.HighWatermark() {
		if err := p.log.SetHighWatermark(hw); err != nil {
			f.m.logger.Warn("set follower high watermark", "topic", p.key.topic, "partition", p.key.partition, "hw", hw, "err", err)
		}
	}
	// The leader's log start (moved by DeleteRecords or retention) moves
	// ours, as far as our high watermark: the records below it are gone
	// for every reader, and a replica that leads next must not serve them.
	if ls := min(rp.LogStartOffset, p.log.HighWatermark()); ls > p.log.LogStartOffset() {
		if err := p.log.DeleteRecordsBefore(ls); err != nil {
			f.m.logger.Warn("follow the leader's log start", "topic", p.key.topic, "partition", p.key.partition, "log_start", ls, "err", err)
		}
	}
	return true
}

func topicOf(ts *[]kmsg.OffsetForLeaderEpochRequestTopic, name string) *kmsg.OffsetForLeaderEpochRequestTopic {
	if n := len(*ts); n > 0 && (*ts)[n-1].Topic == name {
		return &(*ts)[n-1]
	}
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = name
	*ts = append(*ts, t)
	return &(*ts)[len(*ts)-1]
}

func fetchTopicOf(ts *[]kmsg.FetchRequestTopic, name string) *kmsg.FetchRequestTopic {
	if n := len(*ts); n > 0 && (*ts)[n-1].Topic == name {
		return &(*ts)[n-1]
	}
	t := kmsg.NewFetchRequestTopic()
	t.Topic = name
	*ts = append(*ts, t)
	return &(*ts)[len(*ts)-1]
}

// appendFollower appends a leader's batches as they are: offsets and leader
// epochs kept, the producer table and epoch cache learning them.
var appendFollower = plog.AppendOptions{AssignOffsets: false}
