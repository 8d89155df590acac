package server

// ListGroups (key 16), versions 0-4 (v4 filters by state). Every group
// known to the coordinator is listed, including Empty groups that only hold
// committed offsets. No deviations from Kafka known.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleListGroups(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.List(kreq.(*kmsg.ListGroupsRequest))}, nil
}
