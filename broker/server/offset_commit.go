package server

// OffsetCommit (key 8), versions 2-8: stores committed offsets as records of
// __consumer_offsets (served by broker/group). Generation -1 with no member
// id commits for a group without members (standalone consumers, tools).
//
// Deviations from Kafka: v2-4's retention time is ignored (offsets expire
// after offsets.retention.minutes once the group is empty, Kafka 2.1+'s
// rule); commits are not written through a transaction coordinator; a
// commit that would take the coordinator past group.coordinator.max.bytes
// is answered INVALID_COMMIT_OFFSET_SIZE (as Kafka answers one whose
// records are too large for the offsets topic).

import "github.com/twmb/franz-go/pkg/kmsg"

func handleOffsetCommit(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.CommitOffsets(kreq.(*kmsg.OffsetCommitRequest))}, nil
}
