package server

// ListPartitionReassignments (key 46), version 0 (KIP-455): served. No
// reassignment is ever in progress in sluice (AlterPartitionReassignments
// moves nothing; an assignment rewrite is applied at once), so the answer
// lists no partition, with NONE, whether Topics is null (all) or names
// partitions; as in Kafka, a named partition that does not exist is left
// out rather than refused.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleListPartitionReassignments(_ *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	return kmsgReply{resp}, nil
}
