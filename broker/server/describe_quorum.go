package server

// DescribeQuorum (key 55), versions 0-2 (KIP-595, KIP-853): answered with an
// error. sluice's controller is elected through ZooKeeper, not a KRaft
// quorum: there is no __cluster_metadata log, voters or observers. The
// answer is a top-level INVALID_REQUEST (v2: with a message naming the
// controller), a non-retriable error, so kafka-metadata-quorum exits at
// once. Deviation: a Kafka 3.x broker on ZooKeeper does not advertise the
// key, and its admin client fails with UnsupportedVersionException before
// sending; sluice advertises and answers it so no client is left without an
// answer. The request itself is not read beyond decoding.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeQuorum(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	resp.ErrorCode = kerr.InvalidRequest.Code
	_, controller := s.metadataBrokers(rc.conn)
	msg := fmt.Sprintf("sluice runs on ZooKeeper, not KRaft: no metadata quorum to describe (controller: broker %d)", controller)
	resp.ErrorMessage = &msg
	return kmsgReply{resp}, nil
}
