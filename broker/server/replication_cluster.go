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
	"github.com/sluicehq/sluice/broker/config"
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
		Throttled: func(topic string, partition int32, leaderSide bool) bool {
			t, ok := s.topics.get(topic)
			if !ok {
				return false
			}
			list := t.cfg.FollowerThrottledReplicas
			if leaderSide {
				list = t.cfg.LeaderThrottledReplicas
			}
			return config.ThrottledReplica(list, partition, node.ID())
		},
		LagTimeMax: time.Duration(s.cfg.ReplicaLagTimeMaxMs) * time.Millisecond,
		Clock:      s.clock,
		Logger:     s.logger.With("component", "replica"),
	})
	s.SetReplicas(m)
	if cfg, err := node.BrokerConfig(); err != nil {
		s.logger.Warn("cluster: reading this broker's dynamic configs (replication throttles); none applied", "err", err)
	} else if len(cfg) > 0 {
		s.applyBrokerConfig(cfg)
	}
}

// applyReplicas hands the Manager the states of the partitions this broker
// holds a replica of and has open (reconcile, after openAssigned), and
// stops those it replicates that are no longer assigned here.
func (s *Server) applyReplicas(states map[partitionKey]cluster.PartitionState) {
	if s.replicas == nil {
		return
	}
	open := func(k partitionKey) bool {
		t, ok := s.topics.get(k.topic)
		return ok && t.partition(k.partition) != nil
	}
	held := func(k partitionKey) bool { return s.replicas.Holds(k.topic, k.partition) }
	if out := replicaStates(s.cluster.self, states, open, held, s.replicas.States()); len(out) > 0 {
		s.replicas.Apply(out)
	}
}

// replicaStates picks what a reconcile hands the Manager: the state of each
// partition with a replica on self that is open here; a stop (the state,
// whose replicas do not include self) for each partition the Manager holds
// that is no longer assigned here; a stop naming no replica for each one
// it holds that no state lists any more (its topic deleted). The states of
// the cluster's other partitions are not handed over: the Manager would
// ignore them, once per partition of the cluster at every reconcile.
func replicaStates(self int32, states map[partitionKey]cluster.PartitionState, open, held func(partitionKey) bool, have []replica.State) []replica.State {
	var out []replica.State
	for k, st := range states {
		if !slices.Contains(st.Replicas, self) {
			if held(k) {
				out = append(out, replica.State{Topic: st.Topic, Partition: st.Partition, Leader: st.Leader,
					LeaderEpoch: st.LeaderEpoch, Replicas: st.Replicas, Version: st.Version})
			}
			continue
		}
		if !open(k) {
			continue // not open yet: the next reconcile hands it over
		}
		out = append(out, replica.State{Topic: st.Topic, Partition: st.Partition, Leader: st.Leader,
			LeaderEpoch: st.LeaderEpoch, ISR: st.ISR, Replicas: st.Replicas, Version: st.Version})
	}
	for _, h := range have {
		if _, ok := states[partitionKey{h.Topic, h.Partition}]; !ok {
			out = append(out, replica.State{Topic: h.Topic, Partition: h.Partition, Leader: -1, LeaderEpoch: h.LeaderEpoch, Version: h.Version})
		}
	}
	return out
}
