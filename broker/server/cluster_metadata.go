package server

// The cluster's side of Metadata and DescribeCluster: brokers, the
// controller and the partition states (see metadata.go for the versions).

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataBrokers lists the brokers and the controller for Metadata: this
// node alone on a single node, every live broker in cluster mode.
func (s *Server) metadataBrokers(c *conn) ([]kmsg.MetadataResponseBroker, int32) {
	if s.cluster == nil {
		adv := s.advertisedFor(c)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = s.cfg.NodeID, adv.host, int32(adv.port)
		return []kmsg.MetadataResponseBroker{b}, s.cfg.NodeID
	}
	var out []kmsg.MetadataResponseBroker
	for _, bi := range s.cluster.node.Brokers() {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = bi.ID, bi.Host, bi.Port
		if c != nil && c.l != nil {
			for _, e := range bi.Endpoints { // the client's listener, as Kafka answers
				if e.Name == c.l.name {
					b.Host, b.Port = e.Host, e.Port
				}
			}
		}
		if bi.Rack != "" {
			rack := bi.Rack
			b.Rack = &rack
		}
		out = append(out, b)
	}
	controller, _ := s.cluster.node.Controller()
	return out, controller
}

// clusterPartitions answers a topic's partitions from the cluster's states.
func (s *Server) clusterPartitions(t *topic) []kmsg.MetadataResponseTopicPartition {
	live := map[int32]bool{}
	for _, b := range s.cluster.node.Brokers() {
		live[b.ID] = true
	}
	out := make([]kmsg.MetadataResponseTopicPartition, 0, t.npart)
	for p := range t.npart {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		st, ok := s.cluster.state(t.name, p)
		switch {
		case ok:
			mp.Leader, mp.LeaderEpoch, mp.Replicas, mp.ISR = st.Leader, st.LeaderEpoch, slices.Clone(st.Replicas), slices.Clone(st.ISR)
		case int(p) < len(t.replicas):
			mp.Leader, mp.LeaderEpoch, mp.Replicas = -1, -1, slices.Clone(t.replicas[p])
		default:
			mp.Leader, mp.LeaderEpoch = -1, -1
		}
		if mp.Replicas == nil {
			mp.Replicas = []int32{}
		}
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		mp.OfflineReplicas = []int32{}
		for _, b := range mp.Replicas {
			if !live[b] {
				mp.OfflineReplicas = append(mp.OfflineReplicas, b)
			}
		}
		if mp.Leader < 0 || !live[mp.Leader] {
			mp.Leader = -1
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		out = append(out, mp)
	}
	return out
}
