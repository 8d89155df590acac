package server

// FindCoordinator (key 10), versions 0-4 (v4 batches the keys).
//
// A single node is the coordinator of every group. In cluster mode the
// coordinator of a group is the leader of its partition of
// __consumer_offsets (COORDINATOR_NOT_AVAILABLE while it has none; see
// group_cluster.go). As Kafka does, the first lookup of a group creates
// __consumer_offsets. Deviation: sluice has
// no transactions; a transaction key is answered with this node too, and
// InitProducerId then refuses the transactional id, so clients fail fast.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleFindCoordinator(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	addr := s.advertised()
	seen := map[string]bool{}
	for _, key := range keys {
		if seen[key] {
			continue
		}
		seen[key] = true
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Host, c.Port = key, s.cfg.NodeID, addr.host, int32(addr.port)
		switch {
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			c.ErrorCode = kerr.InvalidRequest.Code
		case req.CoordinatorType == 0 && key == "":
			c.ErrorCode = kerr.InvalidGroupID.Code
		case req.CoordinatorType == 0:
			if err := s.groups.EnsureOffsetsTopic(); err != nil {
				rc.logger.Error("create the offsets topic", "err", err)
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			} else if s.cluster != nil {
				c.NodeID, c.Host, c.Port, c.ErrorCode = s.coordinatorOf(key)
			}
		}
		if c.ErrorCode != 0 {
			c.NodeID, c.Host, c.Port = -1, "", -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return kmsgReply{resp}, nil
}
