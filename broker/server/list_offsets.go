package server

// ListOffsets (key 2), versions 1-7.
//
// Timestamp -2 answers the log start offset, -1 the high watermark (equal to
// the log end offset on a single node; the minimum log end over the ISR in
// cluster mode), or the last stable offset with
// isolation_level 1 (read_committed), and t >= 0 the offset and timestamp of the first
// record with a timestamp >= t, found through the time index and then inside
// its (decompressed) batch (offset -1 when there is none).
// -3 (max timestamp, v7) deviates from Kafka: it answers the last batch's max
// timestamp and last offset, which is the same as Kafka's answer when
// timestamps do not go backwards. The leader epoch answered beside an
// offset is, as in Kafka, the partition's current leader epoch for -1 and
// the epoch of the record at the offset otherwise (from the epoch cache;
// always 0 on a single node, which is never re-elected), so that a client
// validating its position after a leader change (KIP-320) asks
// OffsetForLeaderEpoch about the epoch its offset came from. A
// CurrentLeaderEpoch other than the partition's is FENCED_LEADER_EPOCH
// (older) or UNKNOWN_LEADER_EPOCH (newer).
//
// Bounds: the timestamp search decompresses batches as a stream, at most
// listOffsetsDecompressBudget bytes per request over all its partitions
// (beyond it a partition is answered at batch granularity: the base offset
// and max timestamp of the batch holding the first record at or after t),
// and broker/log decompresses only a few batches at once across all requests.
// As in Kafka, a partition named more than once is answered INVALID_REQUEST
// each time, without a lookup.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
)

// listOffsetsDecompressBudget is what one ListOffsets request may decompress.
const listOffsetsDecompressBudget = 64 << 20

func handleListOffsets(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	budget := &plog.DecompressBudget{Remaining: listOffsetsDecompressBudget}
	if b := s.listOffsetsBudget.Load(); b > 0 {
		budget.Remaining = b
	}
	named := map[sessionKey]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			named[sessionKey{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			switch {
			case named[sessionKey{rt.Topic, rp.Partition}] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case !ok:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				part, code := s.leaderPartition(t, rp.Partition)
				if code == 0 {
					code = s.leaderEpochCode(t, rp.Partition, rp.CurrentLeaderEpoch)
				}
				if sp.ErrorCode = code; code == 0 {
					listOffset(rc, part, rp.Timestamp, req.IsolationLevel, s.leaderEpoch(t, rp.Partition), budget, &sp)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}

// listOffset answers one partition. current is the partition's leader
// epoch: the answer to -1, and to an offset the epoch cache does not cover.
func listOffset(rc *requestContext, p *partition, ts int64, isolation int8, current int32, budget *plog.DecompressBudget, sp *kmsg.ListOffsetsResponseTopicPartition) {
	l := p.log
	defer func() {
		switch {
		case sp.ErrorCode != 0 || sp.Offset < 0:
			sp.LeaderEpoch = -1
		case ts == -1:
			sp.LeaderEpoch = current
		default:
			if sp.LeaderEpoch = l.EpochAt(sp.Offset); sp.LeaderEpoch < 0 {
				sp.LeaderEpoch = current
			}
		}
	}()
	switch {
	case ts == -2:
		sp.Offset = l.LogStartOffset()
	case ts == -1:
		sp.Offset = latestOffset(l, isolation)
	case ts == -3:
		hw := l.HighWatermark()
		if hw <= l.LogStartOffset() {
			return
		}
		reg, err := l.Read(hw-1, 1, hw)
		if err != nil {
			sp.ErrorCode = readErrorCode(err)
			return
		}
		defer reg.Close()
		b, err := reg.Bytes()
		if err != nil || len(b) < 61 {
			sp.ErrorCode = kerr.KafkaStorageError.Code
			return
		}
		// The last batch of the region: walk the batch headers.
		for len(b) >= 61 {
			size := 12 + int(int32(binary.BigEndian.Uint32(b[8:12])))
			if size < 61 || size > len(b) {
				break
			}
			base := int64(binary.BigEndian.Uint64(b[0:8]))
			sp.Offset = base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
			sp.Timestamp = int64(binary.BigEndian.Uint64(b[35:43]))
			b = b[size:]
		}
	case ts >= 0:
		off, found, ok, err := l.OffsetForTimestampWithin(ts, budget)
		if err != nil {
			rc.logger.Error("offset for timestamp", "topic", p.tp.Topic, "partition", p.tp.Partition, "err", err)
			sp.ErrorCode = readErrorCode(err)
			return
		}
		if ok && off < l.HighWatermark() {
			sp.Offset, sp.Timestamp = off, found
		}
	default:
		sp.ErrorCode = kerr.InvalidRequest.Code
	}
}
