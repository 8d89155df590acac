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
	for _, m := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition, sp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return kmsgReply{resp}, nil
}
