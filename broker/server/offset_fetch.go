package server

// OffsetFetch (key 9), versions 1-8: committed offsets of one group (v1-7)
// or several (v8); null topics (v2+) ask for every committed partition;
// -1 where nothing is committed (served by broker/group). RequireStable
// (v7+) has no effect: sluice has no transactional commits to wait for.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleOffsetFetch(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.FetchOffsets(kreq.(*kmsg.OffsetFetchRequest))}, nil
}
