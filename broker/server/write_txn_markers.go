package server

// WriteTxnMarkers (key 27), versions 0-1.
//
// An inter-broker API: only the transaction coordinator writes markers, and
// sluice's writes them to its own partition logs directly. A client's
// request is refused: every partition is answered
// CLUSTER_AUTHORIZATION_FAILED (what Kafka answers a principal without
// ClusterAction), and nothing is written. The answer holds at most one
// entry per partition named (a request is bounded by smallRequestMax).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleWriteTxnMarkers(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	rc.logger.Warn("refused WriteTxnMarkers from a client", "markers", len(req.Markers))
	// Each slice of the answer is made at its final length: appending
	// doubled 1,000,000 partition entries of a 4 MB request into 148 MB.
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i, m := range req.Markers {
		sm := &resp.Markers[i]
		sm.ProducerID = m.ProducerID
		sm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for j, t := range m.Topics {
			st := &sm.Topics[j]
			st.Topic = t.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for k, p := range t.Partitions {
				st.Partitions[k].Partition, st.Partitions[k].ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
			}
		}
	}
	return kmsgReply{resp}, nil
}
