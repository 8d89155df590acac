package server

// SyncGroup (key 14), versions 0-5: the leader hands in the assignment,
// followers wait for it (served by broker/group). v5 checks the protocol
// type and name against the group's (INCONSISTENT_GROUP_PROTOCOL).
// Deviation from Kafka: an assignment past a byte bound of the group
// (broker/group/doc.go, "Bounds") is answered MESSAGE_TOO_LARGE to the
// leader and every follower, where Kafka answers a group record too large
// to store UNKNOWN_SERVER_ERROR; the group rebalances in both.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleSyncGroup(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.Sync(rc.ctx, kreq.(*kmsg.SyncGroupRequest))}, nil
}
