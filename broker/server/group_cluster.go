package server

// Groups in cluster mode: the coordinator of a group is the leader of its
// partition of __consumer_offsets (group.PartitionFor). FindCoordinator
// answers that broker; the group APIs sent to another broker are answered
// NOT_COORDINATOR (per group where a request names several), and the
// client looks the coordinator up again. A broker that becomes the leader
// of an offsets partition loads its groups and offsets (reconcile →
// group.Coordinator.LoadPartition) before it answers for them; one that
// stops leading drops them. The offsets topic is created with replication
// factor offsets.topic.replication.factor's default, 3, or the live
// brokers if fewer (as Kafka lets a small cluster start).
//
// The coordinator's appends (commits, group metadata) are replicated
// appends waited for like acks=all (group_storage.go): a commit is answered
// once the partition's ISR holds it, so the next coordinator has it. Each
// goes in the leader epoch the partition's groups were loaded in
// (registry.groupEpochs, checked under the replica's lock as the append
// is made): a coordinator that lost the partition cannot append after the
// new leader took it, and one that leads it again in a later epoch reloads
// its groups first (what the other coordinator wrote meanwhile). An
// OffsetCommit waits without the coordinator's lock (group.StagedStorage;
// the group's later commits queue behind it). Deviation from Kafka: the
// other appends (a group's metadata at a rebalance, expiry and delete
// tombstones) wait holding it, so a partition whose ISR is slow stalls this
// broker's other groups for up to the commit timeout while they do.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
)

// internalReplicationFactor is the replication factor of the internal
// topics (__consumer_offsets, _schemas) in cluster mode, capped by the
// live brokers.
const internalReplicationFactor = 3

type handler = func(s *Server, rc *requestContext, req kmsg.Request) (reply, error)

// coordinated wraps a group API handler: in cluster mode the groups this
// broker does not coordinate are answered NOT_COORDINATOR.
func coordinated(h handler) handler {
	return func(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
		if s.cluster == nil {
			return h(s, rc, kreq)
		}
		whole, refuse := s.refuseGroups(kreq)
		if whole != nil {
			return kmsgReply{whole}, nil
		}
		rep, err := h(s, rc, kreq)
		if kr, ok := rep.(kmsgReply); ok && refuse != nil && err == nil {
			refuse(kr.resp)
		}
		return rep, err
	}
}

// coordinates reports whether this broker coordinates group id now: it
// leads the group's offsets partition and has loaded it.
func (s *Server) coordinates(id string) bool {
	if s.cluster == nil {
		return true
	}
	t, ok := s.topics.get(group.OffsetsTopic)
	if !ok || t.npart == 0 {
		return false
	}
	return s.cluster.owns(group.PartitionFor(id, t.npart))
}

// refuseGroups answers a request for one group this broker does not
// coordinate as a whole (whole), or removes from a request for several the
// groups it does not coordinate and returns refuse, which adds their
// NOT_COORDINATOR entries to the answer.
func (s *Server) refuseGroups(kreq kmsg.Request) (whole kmsg.Response, refuse func(kmsg.Response)) {
	code := kerr.NotCoordinator.Code
	switch req := kreq.(type) {
	case *kmsg.JoinGroupRequest:
		if !s.coordinates(req.Group) {
			resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if !s.coordinates(req.Group) {
			resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !s.coordinates(req.Group) {
			resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !s.coordinates(req.Group) {
			resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = code
			return resp, nil
		}
	case *kmsg.OffsetCommitRequest:
		if !s.coordinates(req.Group) {
			resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewOffsetCommitResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewOffsetCommitResponseTopicPartition()
					sp.Partition, sp.ErrorCode = rp.Partition, code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil
		}
	case *kmsg.OffsetFetchRequest:
		if req.Version < 8 {
			if !s.coordinates(req.Group) {
				resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
				resp.ErrorCode = code
				return resp, nil
			}
			return nil, nil
		}
		kept, refused := splitCoordinated(s, req.Groups, func(g kmsg.OffsetFetchRequestGroup) string { return g.Group })
		if len(refused) == 0 {
			return nil, nil
		}
		req.Groups = kept
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.OffsetFetchResponse)
			for _, id := range refused {
				g := kmsg.NewOffsetFetchResponseGroup()
				g.Group, g.ErrorCode = id, code
				resp.Groups = append(resp.Groups, g)
			}
		}
	case *kmsg.DescribeGroupsRequest:
		kept, refused := splitCoordinated(s, req.Groups, func(id string) string { return id })
		if len(refused) == 0 {
			return nil, nil
		}
		req.Groups = kept
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.DescribeGroupsResponse)
			for _, id := range refused {
				g := kmsg.NewDescribeGroupsResponseGroup()
				g.Group, g.ErrorCode = id, code
				resp.Groups = append(resp.Groups, g)
			}
		}
	case *kmsg.DeleteGroupsRequest:
		kept, refused := splitCoordinated(s, req.Groups, func(id string) string { return id })
		if len(refused) == 0 {
			return nil, nil
		}
		req.Groups = kept
		return nil, func(r kmsg.Response) {
			resp := r.(*kmsg.DeleteGroupsResponse)
			for _, id := range refused {
				g := kmsg.NewDeleteGroupsResponseGroup()
				g.Group, g.ErrorCode = id, code
				resp.Groups = append(resp.Groups, g)
			}
		}
	}
	return nil, nil
}

// coordinatorOf returns the broker that coordinates group id in cluster
// mode (the leader of its offsets partition), or an error code:
// COORDINATOR_NOT_AVAILABLE while the partition has no live leader.
func (s *Server) coordinatorOf(id string) (nodeID int32, host string, port int32, code int16) {
	t, ok := s.topics.get(group.OffsetsTopic)
	if !ok || t.npart == 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	st, ok := s.cluster.state(group.OffsetsTopic, group.PartitionFor(id, t.npart))
	if !ok || st.Leader < 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	for _, b := range s.cluster.node.Brokers() {
		if b.ID == st.Leader {
			return b.ID, b.Host, b.Port, 0
		}
	}
	return -1, "", -1, kerr.CoordinatorNotAvailable.Code
}

// followGroups hands the offsets partitions whose leadership here began to
// the group coordinator (it loads them) and drops those whose leadership
// ended. Called by reconcile, after the partitions are open.
func (s *Server) followGroups(leads map[partitionKey]bool) {
	cv := s.cluster
	t, ok := s.topics.get(group.OffsetsTopic)
	if !ok {
		return
	}
	for p := range t.npart {
		lead := leads[partitionKey{group.OffsetsTopic, p}] && t.partition(p) != nil
		epoch := s.coordinatorEpoch(p)
		if epoch < 0 {
			lead = false // the replica Manager does not lead it (yet)
		}
		loadedIn, loaded := cv.ownedEpoch(p)
		switch {
		case lead && (!loaded || loadedIn != epoch):
			// Not loaded, or loaded in an earlier leadership (lost and
			// regained between two reconciles): another coordinator may
			// have written meanwhile, so the groups are read again.
			s.topics.groupEpochs.Delete(p)
			cv.setOwned(p, 0, false)
			if err := s.groups.LoadPartition(p, t.npart); err != nil {
				s.logger.Error("cluster: load the groups of an offsets partition; retrying", "partition", p, "err", err)
				continue
			}
			s.topics.groupEpochs.Store(p, epoch)
			s.logger.Info("cluster: coordinating the groups of an offsets partition", "partition", p, "leader_epoch", epoch, "reloaded", loaded)
			cv.setOwned(p, epoch, true)
		case !lead && loaded:
			s.topics.groupEpochs.Delete(p)
			cv.setOwned(p, 0, false)
			s.groups.DropPartition(p)
			s.logger.Info("cluster: no longer coordinating the groups of an offsets partition", "partition", p)
		}
	}
}

// coordinatorEpoch is the leader epoch in which this broker leads offsets
// partition p: the replica Manager's (what an append is checked against),
// or the partition state's without one; -1 when it does not lead it.
func (s *Server) coordinatorEpoch(p int32) int32 {
	if s.replicas != nil {
		leader, epoch, ok := s.replicas.Role(group.OffsetsTopic, p)
		if !ok || !leader {
			return -1
		}
		return epoch
	}
	st, ok := s.cluster.state(group.OffsetsTopic, p)
	if !ok || st.Leader != s.cluster.self {
		return -1
	}
	return st.LeaderEpoch
}

// splitCoordinated splits a request's groups into those this broker
// coordinates (kept, in order) and the ids of the others (refused).
func splitCoordinated[T any](s *Server, groups []T, id func(T) string) (kept []T, refused []string) {
	for _, g := range groups {
		if s.coordinates(id(g)) {
			kept = append(kept, g)
		} else {
			refused = append(refused, id(g))
		}
	}
	return kept, refused
}
