package group

// Offsets committed inside a transaction (TxnOffsetCommit, KIP-98/KIP-447).
//
// A transactional producer's offsets are written at once to the group's
// partition of __consumer_offsets as a transactional batch (its producer id
// and epoch, sequence 0 and unchecked; Kafka writes none), but they stay pending: OffsetFetch
// does not answer them (with require_stable it answers
// UNSTABLE_OFFSET_COMMIT for the partitions they cover). The transaction
// coordinator ends the transaction by writing a COMMIT or ABORT marker for
// the producer to that partition and then calls CompleteTxn: a COMMIT makes
// the offsets the group's, an ABORT drops them. Replay at start does the
// same from the log: transactional records go pending, markers complete
// them, and what is pending at the end waits for the coordinator's marker
// (the transaction coordinator completes transactions left in a prepare
// state at its own start). Pending offsets count against
// group.coordinator.max.bytes.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/internal/recbatch"
)

// OffsetsPartition returns the partition of OffsetsTopic of group id,
// creating the topic if needed (AddOffsetsToTxn adds it to a transaction).
func (c *Coordinator) OffsetsPartition(id string) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ensurePartitions(); err != nil {
		return -1, err
	}
	return partitionFor(id, c.partitions), nil
}

// TxnCommitOffsets serves TxnOffsetCommit. The caller has checked that the
// producer's ongoing transaction holds the group's offsets partition.
func (c *Coordinator) TxnCommitOffsets(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	answer := func(code func(topic string, p int32) int16) *kmsg.TxnOffsetCommitResponse {
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code(t.Topic, p.Partition)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	all := func(code int16) *kmsg.TxnOffsetCommitResponse {
		return answer(func(string, int32) int16 { return code })
	}
	if req.Group == "" {
		return all(kerr.InvalidGroupID.Code)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	g := c.groups[req.Group]
	if req.MemberID != "" || req.Generation >= 0 {
		if g == nil {
			return all(kerr.IllegalGeneration.Code)
		}
		m, code := g.memberFor(req.MemberID, req.InstanceID, req.Generation, true)
		if code != 0 {
			return all(code)
		}
		m.lastSeen = now
	}
	codes := map[topicPartition]int16{}
	var recs []record
	var ok []accepted
	var grow int64
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := topicPartition{t.Topic, p.Partition}
			if _, done := codes[tp]; done {
				continue // named twice: the first value is taken, both get its answer
			}
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case len(meta) > c.opts.OffsetMetadataMaxBytes:
				codes[tp] = kerr.OffsetMetadataTooLarge.Code
			case !c.opts.Storage.PartitionExists(t.Topic, p.Partition):
				codes[tp] = kerr.UnknownTopicOrPartition.Code
			default:
				codes[tp] = 0
				o := committed{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: meta, commitMs: now.UnixMilli()}
				ok = append(ok, accepted{tp: tp, o: o})
				grow += offsetSize(tp, o)
				recs = append(recs, record{key: offsetKey(req.Group, t.Topic, p.Partition), value: offsetValue(o)})
			}
		}
	}
	refuse := func(code int16) *kmsg.TxnOffsetCommitResponse {
		for _, a := range ok {
			codes[a.tp] = code
		}
		return answer(func(t string, p int32) int16 { return codes[topicPartition{t, p}] })
	}
	if c.mem.used+grow > c.opts.MaxCoordinatorBytes {
		c.logger.Warn("transactional offset commit refused: the coordinator holds group.coordinator.max.bytes",
			"group", req.Group, "partitions", len(ok), "limit", c.opts.MaxCoordinatorBytes)
		return refuse(kerr.InvalidCommitOffsetSize.Code)
	}
	prod := recbatch.Producer{ID: req.ProducerID, Epoch: req.ProducerEpoch, Sequence: 0, Transactional: true} // sequence unchecked (plog.CoordinatorAppend)
	if err := c.appendRecordsAs(req.Group, recs, prod); err != nil {
		if errors.Is(err, ErrRecordTooLarge) {
			return refuse(kerr.InvalidCommitOffsetSize.Code)
		}
		c.logger.Error("store transactional offsets", "group", req.Group, "err", err)
		return refuse(kerr.CoordinatorNotAvailable.Code)
	}
	for _, a := range ok {
		c.addPendingLocked(req.ProducerID, req.Group, a.tp, a.o)
	}
	return answer(func(t string, p int32) int16 { return codes[topicPartition{t, p}] })
}

// addPendingLocked holds o as producer pid's pending offset of tp in group.
func (c *Coordinator) addPendingLocked(pid int64, groupID string, tp topicPartition, o committed) {
	byGroup := c.pending[pid]
	if byGroup == nil {
		byGroup = map[string]map[topicPartition]committed{}
		c.pending[pid] = byGroup
	}
	offs := byGroup[groupID]
	if offs == nil {
		offs = map[topicPartition]committed{}
		byGroup[groupID] = offs
		c.mem.used += groupOverhead + int64(len(groupID))
	}
	if old, ok := offs[tp]; ok {
		c.mem.used -= offsetSize(tp, old)
	}
	offs[tp] = o
	c.mem.used += offsetSize(tp, o)
}

// replayPending is replay for a record of producer pid's transactional
// batch: an offset commit goes pending.
func (c *Coordinator) replayPending(p int32, pid int64, r record, now time.Time) error {
	if len(r.key) < 2 || r.value == nil {
		return nil
	}
	if version := int16(r.key[0])<<8 | int16(r.key[1]); version != 0 && version != keyOffsetCommit {
		return nil
	}
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(r.key); err != nil {
		return err
	}
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(r.value); err != nil {
		return err
	}
	c.addPendingLocked(pid, k.Group, topicPartition{k.Topic, k.Partition},
		committed{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestamp})
	return nil
}

// CompleteTxn applies the marker the transaction coordinator wrote for
// producer pid to partition p of OffsetsTopic: commit makes the pending
// offsets of the groups of p the groups' own, abort drops them.
func (c *Coordinator) CompleteTxn(p int32, pid int64, commit bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completeTxnLocked(p, pid, commit)
}

func (c *Coordinator) completeTxnLocked(p int32, pid int64, commit bool) {
	byGroup := c.pending[pid]
	if byGroup == nil {
		return
	}
	now := c.clock.Now()
	for id, offs := range byGroup {
		if c.partitions > 0 && partitionFor(id, c.partitions) != p {
			continue
		}
		c.mem.used -= groupOverhead + int64(len(id))
		for tp, o := range offs {
			c.mem.used -= offsetSize(tp, o)
		}
		delete(byGroup, id)
		if !commit || len(offs) == 0 {
			continue
		}
		g := c.groupOrNew(id, now)
		for tp, o := range offs {
			g.setOffset(tp, o)
		}
		c.commits.Add(int64(len(offs)))
		if g.state == StateEmpty && g.expiry.pos == 0 {
			c.rescheduleExpiry(g, now)
		}
	}
	if len(byGroup) == 0 {
		delete(c.pending, pid)
	}
}

// unstableLocked reports whether an open transaction holds a pending offset
// of tp in group id.
func (c *Coordinator) unstableLocked(id string, tp topicPartition) bool {
	for _, byGroup := range c.pending {
		if _, ok := byGroup[id][tp]; ok {
			return true
		}
	}
	return false
}
