package server

// DeleteRecords (key 21), versions 0-2: raises a partition's log start
// offset (offset -1 = the high watermark) and deletes the segments wholly
// below it; the answer is the new low watermark. An offset above the high
// watermark is OFFSET_OUT_OF_RANGE; a compact-only topic is refused with
// POLICY_VIOLATION, as Kafka does. On a single node the change is local
// and done before the answer. In cluster mode the leader moves its log
// start, then (as Kafka's delayed DeleteRecords) answers once the low
// watermark — the smallest log start over the leader and its in-sync
// followers, which learn the new one from their next fetch answer and
// report theirs in the fetch after — reached the offset, or
// REQUEST_TIMED_OUT (low watermark -1) after TimeoutMillis.

import (
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
)

func handleDeleteRecords(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	seen := partitionsOnce{}
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			if !seen.first(rt.Topic, rp.Partition) {
				continue
			}
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			switch {
			case !ok:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case strings.Contains(t.cfg.CleanupPolicy, "compact") && !strings.Contains(t.cfg.CleanupPolicy, "delete"):
				sp.ErrorCode = kerr.PolicyViolation.Code
			default:
				if part, code := s.leaderPartition(t, rp.Partition); code != 0 {
					sp.ErrorCode = code
				} else {
					sp.LowWatermark, sp.ErrorCode = deleteRecordsBefore(rc, part, rp.Offset)
					if sp.ErrorCode == 0 && s.replicas != nil {
						sp.LowWatermark, sp.ErrorCode = s.replicas.WaitLowWatermark(rc.ctx, t.name, rp.Partition, sp.LowWatermark,
							time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
						if sp.ErrorCode != 0 {
							sp.LowWatermark = -1 // as Kafka's expired DeleteRecords
						}
					}
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}

func deleteRecordsBefore(rc *requestContext, p *partition, offset int64) (int64, int16) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hw := p.log.HighWatermark()
	if offset == -1 {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return -1, kerr.OffsetOutOfRange.Code
	}
	if err := p.log.DeleteRecordsBefore(offset); err != nil {
		if errors.Is(err, plog.ErrOffsetOutOfRange) {
			return -1, kerr.OffsetOutOfRange.Code
		}
		rc.logger.Error("delete records", "partition", p.tp.String(), "offset", offset, "err", err)
		return -1, kerr.KafkaStorageError.Code
	}
	return p.log.LogStartOffset(), 0
}
