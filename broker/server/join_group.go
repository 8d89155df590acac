package server

// JoinGroup (key 11), versions 0-9: the classic protocol's join phase,
// served by broker/group. The request waits until the join phase ends (all
// members rejoined or the rebalance timeout passed); the connection's
// later requests wait behind it, as on Kafka. v4+ answers a new dynamic
// member MEMBER_ID_REQUIRED with its id first (KIP-394); v5+ static
// membership (group.instance.id, KIP-345).
//
// Deviations from Kafka: a static member that did not rejoin by the end of
// a join phase is removed like a dynamic one; SkipAssignment (v9) is never
// set: a restarted static leader triggers a rebalance instead. A member
// whose metadata would take the group past group.max.metadata.bytes, the
// coordinator past group.coordinator.max.bytes, or the group record past
// the offsets topic's max.message.bytes is answered MESSAGE_TOO_LARGE at
// once (Kafka has no such check); a protocol type or name over 255 bytes is
// answered INCONSISTENT_GROUP_PROTOCOL (broker/group/doc.go, "Bounds").

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
)

func handleJoinGroup(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	return kmsgReply{s.groups.Join(rc.ctx, req, rc.client())}, nil
}

// client names the requesting client for the group coordinator (Kafka
// reports the host as "/ip").
func (rc *requestContext) client() group.Client {
	c := group.Client{Host: "/" + rc.conn.nc.RemoteAddr().String()}
	if rc.hdr.clientID != nil {
		c.ID = *rc.hdr.clientID
	}
	return c
}
