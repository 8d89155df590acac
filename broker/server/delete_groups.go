package server

// DeleteGroups (key 42), versions 0-2: removes Empty groups with their
// committed offsets (tombstones in __consumer_offsets); NON_EMPTY_GROUP
// while members remain, GROUP_ID_NOT_FOUND for an unknown group.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleDeleteGroups(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.Delete(kreq.(*kmsg.DeleteGroupsRequest))}, nil
}
