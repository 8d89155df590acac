package server

// The server's side of replication (broker/replica), used only when a
// replica.Manager is set (cluster mode); without one every path below is
// skipped and the server is the single node it always was.
//
//   - Produce: the Manager appends as leader in its leader epoch
//     (NOT_LEADER_OR_FOLLOWER on a follower, NOT_ENOUGH_REPLICAS for acks=-1
//     below min.insync.replicas); acks=-1 then waits, for every partition of
//     the request together and at most TimeoutMillis, until the high
//     watermark passes the append (REQUEST_TIMED_OUT,
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND). The high watermark is the Manager's
//     to move, not the append's.
//   - Fetch: only the leader serves (NOT_LEADER_OR_FOLLOWER), and
//     CurrentLeaderEpoch is checked against its epoch (FENCED_LEADER_EPOCH,
//     UNKNOWN_LEADER_EPOCH). A fetch with replica_id >= 0 is a follower's:
//     it reports the follower's log end (FollowerFetched) and reads up to the
//     log end instead of the high watermark. With last_fetched_epoch >= 0
//     (v12, KIP-320) the leader first checks the follower's log against its
//     own: when that epoch ends at the leader before the fetch offset, or is
//     not one of the leader's, the answer carries no records and the
//     leader's end of the largest epoch at or below it as DivergingEpoch,
//     and the fetch offset is not taken as the follower's log end (it holds
//     records the leader has not). An epoch the leader cannot place is
//     OFFSET_OUT_OF_RANGE. Consumers' fetches are not checked (they
//     validate with OffsetForLeaderEpoch).
//   - OffsetForLeaderEpoch: answered by the leader only, its current epoch
//     counting from its first offset (Manager.EndOffsetForEpoch).
//   - The coordinators' appends to their internal topics (group_storage.go)
//     go through AppendLeader and WaitAppended as an acks=-1 produce does,
//     so a commit is answered only once the ISR holds it.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/replica"
)

// SetReplicas hands the server the replication Manager of cluster mode and
// exports its metrics. Call it before serving; nil (the default) is single
// node. Shutdown closes the Manager before the logs.
func (s *Server) SetReplicas(m *replica.Manager) {
	s.replicas = m
	s.topics.coordinatorRepl.Store(m)
	if m != nil {
		if err := s.metrics.reg.Register(m.Collector()); err != nil {
			s.logger.Warn("replica metrics not registered", "err", err)
		}
	}
}

// PartitionLog returns the open log of a partition of a registered topic
// (what replica.Options.Log opens).
func (s *Server) PartitionLog(topic string, partition int32) (*plog.Log, error) {
	t, ok := s.topics.get(topic)
	if !ok {
		return nil, fmt.Errorf("server: unknown topic %q", topic)
	}
	p := t.partition(partition)
	if p == nil {
		return nil, fmt.Errorf("server: topic %q has no partition %d here", topic, partition)
	}
	return p.log, nil
}

// replicatedAppend is an acks=-1 append waiting for its high watermark.
type replicatedAppend struct {
	topic, part int // index in the answer
	name        string
	partition   int32
	appended    replica.Appended
}

// produceReplicated is produceOne for a replicated partition. An acks=-1
// append is added to waits.
func produceReplicated(s *Server, rc *requestContext, acks int16, t *topic, p *partition, records []byte, sp *kmsg.ProduceResponseTopicPartition, waits *[]replicatedAppend, ti, pi int) {
	if len(records) == 0 {
		sp.ErrorCode = kerr.CorruptMessage.Code
		return
	}
	p.mu.Lock()
	res, code, err := s.replicas.AppendLeader(t.name, p.tp.Partition, acks, records, plog.AppendOptions{})
	p.mu.Unlock()
	if code != 0 {
		sp.ErrorCode = code
		return
	}
	if err != nil {
		sp.ErrorCode = appendErrorCode(err)
		if sp.ErrorCode == kerr.KafkaStorageError.Code {
			rc.logger.Error("append", "topic", t.name, "partition", p.tp.Partition, "err", err)
		}
		msg := err.Error()
		sp.ErrorMessage = &msg
		if sp.ErrorCode == kerr.OutOfOrderSequenceNumber.Code || sp.ErrorCode == kerr.InvalidProducerEpoch.Code {
			sp.LogStartOffset = p.log.LogStartOffset()
		}
		return
	}
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	if !res.Duplicate {
		s.metrics.bytesIn.WithLabelValues(t.name).Add(float64(len(records)))
		s.metrics.recordsIn.WithLabelValues(t.name).Add(float64(res.LastOffset - res.BaseOffset + 1))
		if s.audit != nil {
			s.audit.Appended(t.name, p.tp.Partition, records)
		}
	}
	if acks == -1 {
		*waits = append(*waits, replicatedAppend{topic: ti, part: pi, name: t.name, partition: p.tp.Partition, appended: res})
	}
}

// awaitReplicated waits for the acks=-1 appends of one request, all within
// its timeout, and turns the failures into the answer's error codes.
func awaitReplicated(s *Server, rc *requestContext, timeoutMillis int32, resp *kmsg.ProduceResponse, waits []replicatedAppend) {
	timeout := time.Duration(max(timeoutMillis, 0)) * time.Millisecond
	deadline := s.clock.Now().Add(timeout)
	for _, w := range waits {
		left := deadline.Sub(s.clock.Now())
		code := int16(kerr.RequestTimedOut.Code)
		if left > 0 {
			code = s.replicas.WaitAppended(rc.ctx, w.name, w.partition, w.appended.Epoch, w.appended.LastOffset, left)
		}
		if code != 0 {
			sp := &resp.Topics[w.topic].Partitions[w.part]
			sp.ErrorCode = code
			sp.BaseOffset = -1
		}
	}
}

// replicaFetchChecks applies the leader's checks to each fetch target and,
// for a follower's fetch, records its fetch offsets and applies the
// leader's replication throttle (throttledUntil: when an overdrawn throttle
// frees, zero if none is). It runs once per Fetch, before the long poll.
func replicaFetchChecks(s *Server, replicaID int32, targets []fetchTarget) (throttledUntil time.Time) {
	now := s.clock.Now()
	for i := range targets {
		w := &targets[i]
		if w.t == nil || w.t.partition(w.partition) == nil {
			continue
		}
		w.replicated = true
		if code := s.replicas.LeaderCheck(w.topicName, w.partition, w.leaderEpoch); code != 0 {
			w.code = code
			continue
		}
		if replicaID >= 0 {
			w.follower = true
			if w.lastFetchedEpoch >= 0 {
				end, epoch, code := s.replicas.EndOffsetForEpoch(w.topicName, w.partition, w.leaderEpoch, w.lastFetchedEpoch)
				switch {
				case code != 0:
					w.code = code
					continue
				case end < 0 || epoch < 0:
					w.code = kerr.OffsetOutOfRange.Code
					continue
				case epoch < w.lastFetchedEpoch || end < w.fetchOffset:
					w.diverging = &divergingEpoch{epoch: epoch, endOffset: end}
					continue
				}
			}
			if _, code := s.replicas.FollowerFetchedAt(w.topicName, w.partition, replicaID, w.fetchOffset, w.logStart, now); code != 0 {
				w.code = code
				continue
			}
			var until time.Time
			w.throttled, w.throttleSkip, until = s.replicas.LeaderThrottle(w.topicName, w.partition, replicaID)
			if w.throttleSkip && (throttledUntil.IsZero() || until.Before(throttledUntil)) {
				throttledUntil = until
			}
		}
	}
	return throttledUntil
}

// chargeLeaderThrottle charges the leader's replication throttle with the
// record bytes an answer carries for throttled replicas. targets and the
// answer's partitions are in the same order.
func chargeLeaderThrottle(s *Server, rep *fetchReply, targets []fetchTarget) {
	var n int64
	i := 0
	for _, ft := range rep.topics {
		for _, fp := range ft.parts {
			if i < len(targets) && targets[i].throttled && fp.region != nil {
				n += fp.region.Len()
			}
			i++
		}
	}
	if n > 0 {
		s.replicas.RecordLeaderThrottled(n)
	}
}

// replicaReadBound is the offset a follower's fetch reads up to: the log end.
const replicaReadBound = math.MaxInt64

// offsetForLeaderEpochReplicated answers one partition of
// OffsetForLeaderEpoch as the leader.
func offsetForLeaderEpochReplicated(s *Server, topic string, rp *kmsg.OffsetForLeaderEpochRequestTopicPartition, sp *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	sp.EndOffset, sp.LeaderEpoch, sp.ErrorCode = s.replicas.EndOffsetForEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch)
}

// closeReplicas stops replication before the logs close (Shutdown).
func (s *Server) closeReplicas(context.Context) {
	if s.replicas != nil {
		s.replicas.Close()
	}
}
