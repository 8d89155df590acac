package server

// FindCoordinator (key 10), versions 0-4 (v4 batches the keys).
//
// A single node is the coordinator of every group and transactional id. In
// cluster mode the coordinator of a group is the leader of its partition of
// __consumer_offsets (COORDINATOR_NOT_AVAILABLE while it has none; see
// group_cluster.go). As Kafka does, the first lookup of a group creates
// __consumer_offsets, of a transactional id __transaction_state. An empty
// group id is INVALID_GROUP_ID, an empty or over-long (32,767 bytes)
// transactional id INVALID_REQUEST. Deviation: the transaction coordinator
// is single-node for now; in cluster mode a transaction key is answered
// COORDINATOR_NOT_AVAILABLE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/txn"
)

func handleFindCoordinator(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	addr := s.advertisedFor(rc.conn)
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
		case key == "" || len(key) > txn.MaxTransactionalIDBytes:
			c.ErrorCode = kerr.InvalidRequest.Code
		case s.cluster != nil: // the transaction coordinator is single-node for now
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			if _, err := s.txn.EnsureStateTopic(key); err != nil {
				rc.logger.Error("create the transaction state topic", "err", err)
				c.ErrorCode = kerr.CoordinatorNotAvailable.Code
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
