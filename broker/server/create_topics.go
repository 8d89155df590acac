package server

// CreateTopics (key 19), versions 2-7.
//
// NumPartitions -1 means num.partitions. On a single node ReplicationFactor
// must be -1 or 1 (INVALID_REPLICATION_FACTOR otherwise) and a manual
// replica assignment is accepted only if every partition lists exactly this
// node. In cluster mode ReplicationFactor -1 means default.replication.factor;
// the partitions are assigned over the live brokers (rack-aware, Kafka's
// algorithm: broker/cluster) and a factor above the live brokers is
// INVALID_REPLICATION_FACTOR; a manual assignment must list partitions
// 0..n-1, each with the same number of distinct live brokers
// (INVALID_REPLICA_ASSIGNMENT otherwise).
// Configs are validated against the supported topic configs
// (INVALID_CONFIG for unknown keys or bad values). ValidateOnly checks
// without creating. Deviations from Kafka: TimeoutMillis is ignored (creation
// is synchronous); a topic name listed twice gets INVALID_REQUEST;
// cleanup.policy=compact is stored and reported, but broker/log does not
// compact yet, so a compact-only topic simply keeps everything.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

func handleCreateTopics(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			st.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, st)
		}
		if seen[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, "topic "+rt.Topic+" is listed more than once in the request")
			continue
		}
		partitions := rt.NumPartitions
		var replicas [][]int32 // cluster mode: the assignment
		if len(rt.ReplicaAssignment) > 0 {
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
				fail(kerr.InvalidRequest.Code, "give either a replica assignment or partitions and replication factor, not both")
				continue
			}
			ok := true
			for i, a := range rt.ReplicaAssignment {
				if a.Partition != int32(i) || (s.cluster == nil && (len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID)) {
					ok = false
				}
				replicas = append(replicas, a.Replicas)
			}
			if !ok && s.cluster == nil {
				fail(kerr.InvalidReplicaAssignment.Code, "this single-node broker accepts only assignments of partitions 0..n-1 to its own node id")
				continue
			}
			if !ok {
				fail(kerr.InvalidReplicaAssignment.Code, "the assignment must list partitions 0..n-1 in order")
				continue
			}
			if msg := s.checkAssignment(replicas); msg != "" {
				fail(kerr.InvalidReplicaAssignment.Code, msg)
				continue
			}
			partitions = int32(len(rt.ReplicaAssignment))
		}
		if partitions == -1 {
			partitions = s.cfg.NumPartitions
		}
		if s.partitionLimit > 0 && partitions > s.partitionLimit {
			fail(kerr.InvalidPartitions.Code, "too many partitions")
			continue
		}
		if rf := rt.ReplicationFactor; s.cluster == nil && rf != -1 && rf != 1 {
			fail(kerr.InvalidReplicationFactor.Code, "replication factor must be 1 (or -1): this cluster has one broker")
			continue
		}
		if s.cluster != nil && replicas == nil {
			var code int16
			var msg string
			if replicas, code, msg = s.assignNew(rt.Topic, 0, partitions, rt.ReplicationFactor); code != 0 {
				fail(code, msg)
				continue
			}
		}
		overrides := map[string]*string{}
		for _, c := range rt.Configs {
			overrides[c.Name] = c.Value
		}
		if err := config.ValidateTopicConfigs(overrides); err != nil {
			fail(kerr.InvalidConfig.Code, err.Error())
			continue
		}
		stored := map[string]string{}
		for k, v := range overrides {
			if v != nil {
				stored[k] = *v
			}
		}
		if len(stored) == 0 {
			stored = nil
		}
		t, code, msg := s.topics.create(rt.Topic, partitions, replicas, stored, req.ValidateOnly)
		if code != 0 {
			fail(code, msg)
			continue
		}
		if !req.ValidateOnly {
			rc.logger.Info("created topic", "topic", rt.Topic, "partitions", partitions, "configs", stored)
		}
		st.TopicID = t.id
		st.NumPartitions, st.ReplicationFactor = partitions, 1
		if len(replicas) > 0 {
			st.ReplicationFactor = int16(len(replicas[0]))
		}
		for _, e := range s.cfg.TopicEntries(t.overrides) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			v := e.Value
			c.Name, c.Value, c.Source = e.Name, &v, e.Source
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}
