package server

// Metadata (key 3), versions 0-12.
//
// Single node: this broker is the only broker, the controller and the leader
// of every partition (leader epoch 0, replicas = ISR = [this node]).
// Cluster mode: every live broker (its client listener and rack), the
// controller, and each partition's leader, leader epoch, replicas, ISR and
// offline replicas (assigned brokers not live) from the partition states
// this broker watches; a partition without a live leader (offline, or not
// yet elected) is LEADER_NOT_AVAILABLE with leader -1. Every broker answers
// alike (the states are ZooKeeper's), up to the moment each sees a change.
// Topics are auto-created with num.partitions when the request allows it
// (v4+: AllowAutoTopicCreation; v0-3: always, as in Kafka) and
// auto.create.topics.enable is true. Deviations: authorized operations are
// not computed (reported as "not requested", -2147483648); a request by
// topic id for an unknown id answers UNKNOWN_TOPIC_ID.
//
// Bounds: the request is decoded here (decodeMetadata), not by kmsg, so that
// a topic named many times is kept, decoded and answered once (Kafka answers
// a set too): 10 MB of the same (or empty) name costs one entry, not ten
// million. A request naming more than maxMetadataTopics distinct topics closes
// the connection, and one request auto-creates at most maxAutoCreates topics:
// the others are answered LEADER_NOT_AVAILABLE (retriable, as Kafka answers a
// topic it is still creating), so clients ask again.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/topicname"
)

const (
	// maxMetadataTopics bounds the distinct topics one Metadata request may name.
	maxMetadataTopics = 100_000
	// maxAutoCreates bounds the topics one Metadata request may auto-create.
	maxAutoCreates = 100
)

// decodeMetadata decodes a Metadata request body as kmsg does, keeping the
// first of each repeated topic (by name, or by id when the name is null).
func decodeMetadata(version int16, body []byte) (kmsg.Request, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(version)
	flexible := req.IsFlexible()
	r := kbin.Reader{Src: body}
	var n int32
	if flexible {
		n = r.CompactArrayLen()
	} else {
		n = r.ArrayLen()
	}
	if version < 1 || n == 0 {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	if !r.Ok() || int64(n)*2 > int64(len(r.Src)) {
		return nil, kbin.ErrNotEnoughData
	}
	names := map[string]struct{}{}
	ids := map[[16]byte]struct{}{}
	for i := int32(0); i < n && r.Ok(); i++ {
		t := kmsg.NewMetadataRequestTopic()
		if version >= 10 {
			t.TopicID = r.Uuid()
		}
		var name *string
		switch {
		case flexible:
			name = r.UnsafeCompactNullableString()
		case version >= 10:
			name = r.UnsafeNullableString()
		default:
			s := r.UnsafeString()
			name = &s
		}
		if version < 10 && name == nil {
			name = new(string)
		}
		if flexible {
			if _, ok := skipTagsReader(&r); !ok {
				return nil, kbin.ErrNotEnoughData
			}
		}
		if name != nil {
			if _, dup := names[*name]; dup {
				continue
			}
			owned := strings.Clone(*name)
			names[owned] = struct{}{}
			t.Topic = &owned
		} else {
			if _, dup := ids[t.TopicID]; dup {
				continue
			}
			ids[t.TopicID] = struct{}{}
		}
		if len(names)+len(ids) > maxMetadataTopics {
			return nil, fmt.Errorf("names more than %d distinct topics", maxMetadataTopics)
		}
		req.Topics = append(req.Topics, t)
	}
	if version >= 4 {
		req.AllowAutoTopicCreation = r.Bool()
	}
	if version >= 8 && version <= 10 {
		req.IncludeClusterAuthorizedOperations = r.Bool()
	}
	if version >= 8 {
		req.IncludeTopicAuthorizedOperations = r.Bool()
	}
	if flexible {
		if _, ok := skipTagsReader(&r); !ok {
			return nil, kbin.ErrNotEnoughData
		}
	}
	if err := r.Complete(); err != nil {
		return nil, err
	}
	return req, nil
}

const authorizedOpsUnknown = -2147483648

func handleMetadata(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers, resp.ControllerID = s.metadataBrokers(rc.conn)
	resp.ClusterID = &s.cfg.ClusterID
	resp.AuthorizedOperations = authorizedOpsUnknown

	allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topics.list() {
			if !rc.allowedQuiet(opDescribe, resTopic, t.name) {
				continue // hidden, as Kafka
			}
			resp.Topics = append(resp.Topics, metadataTopic(s, t, t.name, 0))
		}
		return kmsgReply{resp}, nil
	}
	created := 0
	for _, rt := range req.Topics {
		var (
			t    *topic
			code int16
			name string
		)
		switch {
		case rt.Topic != nil && !rc.allowed(opDescribe, resTopic, *rt.Topic):
			name, code = *rt.Topic, topicDenied
		case rt.Topic != nil:
			name = *rt.Topic
			allowCreate := allowCreate && createAllowed(rc, name)
			if t, _ = s.topics.get(name); t == nil && allowCreate && s.cfg.AutoCreateTopics && topicname.Check(name) == nil {
				if created == maxAutoCreates {
					code = kerr.LeaderNotAvailable.Code
					break
				}
				created++
			}
			if t == nil {
				t, code = s.topics.getOrAutoCreate(name, allowCreate)
			}
		case rt.TopicID != [16]byte{}:
			var ok bool
			if t, ok = s.topics.byID(rt.TopicID); !ok || !rc.allowed(opDescribe, resTopic, t.name) {
				t, code = nil, kerr.UnknownTopicID.Code // as Kafka: an id not described is unknown
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
	if s.cluster != nil {
		mt.Partitions = s.clusterPartitions(t)
		return mt
	}
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
