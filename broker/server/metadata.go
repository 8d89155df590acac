package server

// Metadata (key 3), versions 0-12.
//
// Single node: this broker is the only broker, the controller and the leader
// of every partition (leader epoch 0, replicas = ISR = [this node]).
// Topics are auto-created with num.partitions when the request allows it
// (v4+: AllowAutoTopicCreation; v0-3: always, as in Kafka) and
// auto.create.topics.enable is true. Deviations: authorized operations are
// not computed (reported as "not requested", -2147483648); a request by
// topic id for an unknown id answers UNKNOWN_TOPIC_ID.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const authorizedOpsUnknown = -2147483648

func handleMetadata(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	adv := s.advertised()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, adv.host, int32(adv.port)
	resp.Brokers = append(resp.Brokers, b)
	resp.ClusterID = &s.cfg.ClusterID
	resp.ControllerID = s.cfg.NodeID
	resp.AuthorizedOperations = authorizedOpsUnknown

	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topics.list() {
			resp.Topics = append(resp.Topics, metadataTopic(s, t, t.name, 0))
		}
		return kmsgReply{resp}, nil
	}
	for _, rt := range req.Topics {
		var (
			t    *topic
			code int16
			name string
		)
		switch {
		case rt.Topic != nil:
			name = *rt.Topic
			t, code = s.topics.getOrAutoCreate(name, allowCreate)
		case rt.TopicID != [16]byte{}:
			var ok bool
			if t, ok = s.topics.byID(rt.TopicID); !ok {
				code = kerr.UnknownTopicID.Code
			} else {
				name = t.name
			}
		default:
			code = kerr.InvalidRequest.Code
		}
		mt := metadataTopic(s, t, name, code)
		if t == nil {
			mt.TopicID = rt.TopicID
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return kmsgReply{resp}, nil
}

func metadataTopic(s *Server, t *topic, name string, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = &name
	mt.ErrorCode = code
	mt.AuthorizedOperations = authorizedOpsUnknown
	if t == nil {
		return mt
	}
	mt.TopicID = t.id
	mt.IsInternal = t.name == "__consumer_offsets" || t.name == "__transaction_state"
	for _, p := range t.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.tp.Partition
		mp.Leader = s.cfg.NodeID
		mp.LeaderEpoch = 0
		mp.Replicas = []int32{s.cfg.NodeID}
		mp.ISR = []int32{s.cfg.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
