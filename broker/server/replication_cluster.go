package server

// Cluster mode's replication: the server's adapter between broker/cluster
// (who leads, the ISR) and broker/replica (fetching, the high watermark,
// acks=all). Each reconcile hands the replica Manager the states of the
// partitions with a replica here; the Manager becomes leader or follower
// (truncating by OffsetForLeaderEpoch) or stops, and writes ISR changes
// through the Node's conditional AlterISR.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicehq/sluice/broker/cluster"
	"github.com/sluicehq/sluice/broker/replica"
)

// startReplication creates the replica Manager of a cluster-mode server
// (New, before it serves).
func (s *Server) startReplication(node *cluster.Node) {
	m := replica.New(replica.Options{
		BrokerID: node.ID(),
		Log:      s.PartitionLog,
		Addr:     node.Addr,
		AlterISR: func(ctx context.Context, topic string, partition, leaderEpoch int32, isr []int32, version int32) (int32, error) {
			v, err := node.AlterISR(ctx, topic, partition, leaderEpoch, isr, version)
			if errors.Is(err, cluster.ErrStaleState) {
				return v, errors.Join(replica.ErrStaleState, err)
			}
			return v, err
		},
		MinInSync: func(topic string) int {
			if t, ok := s.topics.get(topic); ok && t.cfg.MinInsyncReplicas > 0 {
				return int(t.cfg.MinInsyncReplicas)
			}
			return 1
		},
		LagTimeMax: time.Duration(s.cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		Clock:      s.clock,
		Logger:     s.logger.With("component", "replica"),
	})
	s.SetReplicas(m)
}

// applyReplicas hands the Manager the states of the partitions this broker
// holds a replica of and has open (reconcile, after openAssigned).
func (s *Server) applyReplicas(states map[partitionKey]cluster.PartitionState) {
	if s.replicas == nil {
		return
	}
	self := s.cluster.self
	var out []replica.State
	for k, st := range states {
		if !slices.Contains(st.Replicas, self) {
			// Not (or no longer) a replica here: the Manager stops what it
			// replicated, and ignores the state otherwise.
			out = append(out, replica.State{Topic: st.Topic, Partition: st.Partition, Leader: st.Leader,
				LeaderEpoch: st.LeaderEpoch, Replicas: st.Replicas, Version: st.Version})
			continue
		}
		if t, ok := s.topics.get(k.topic); !ok || t.partition(k.partition) == nil {
			continue // not open yet: the next reconcile hands it over
		}
		out = append(out, replica.State{Topic: st.Topic, Partition: st.Partition, Leader: st.Leader,
			LeaderEpoch: st.LeaderEpoch, ISR: st.ISR, Replicas: st.Replicas, Version: st.Version})
	}
	// A partition the Manager replicates that no state lists any more (its
	// topic deleted) is stopped with a state naming no replica.
	for _, have := range s.replicas.States() {
		if _, ok := states[partitionKey{have.Topic, have.Partition}]; !ok {
			out = append(out, replica.State{Topic: have.Topic, Partition: have.Partition, Leader: -1, LeaderEpoch: have.LeaderEpoch, Version: have.Version})
		}
	}
	s.replicas.Apply(out)
}
