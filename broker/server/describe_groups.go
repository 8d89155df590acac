package server

// DescribeGroups (key 15), versions 0-5: state, protocol and members (with
// their metadata and assignment) of each named group; an unknown group is
// reported with state "Dead" and no error, as Kafka does before v6.
// Authorized operations are not computed (no ACLs): INT32_MIN.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleDescribeGroups(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.Describe(kreq.(*kmsg.DescribeGroupsRequest))}, nil
}
