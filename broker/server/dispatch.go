package server

import "github.com/twmb/franz-go/pkg/kmsg"

// api is one served Kafka API.
type api struct {
	key  int16
	name string
	// advertisedMin..max is what ApiVersions advertises and what is decoded;
	// a handler may still answer some advertised versions with an error
	// (Produce 0-2).
	advertisedMin, max int16
	handle             func(s *Server, rc *requestContext, req kmsg.Request) (reply, error)
	// decode, if set, replaces kmsg's decoding of the body (after the
	// header's tags): for requests whose repeated entries must be bounded
	// while decoding.
	decode func(version int16, body []byte) (kmsg.Request, error)
	// maxFrame, if set, is the largest request frame of this API; a larger
	// one closes the connection. Decoding a request costs up to ~40 bytes of
	// memory per byte of an array of small entries, so APIs whose requests
	// are small in practice are held well below socket.request.max.bytes.
	maxFrame int
}

// Frame bounds of the APIs that set api.maxFrame.
const (
	smallRequestMax = 4 << 20 // admin and lookup APIs
	fetchRequestMax = 8 << 20 // 500,000 partitions at v4, 250,000 at v12
	// groupRequestMax bounds JoinGroup, SyncGroup, OffsetCommit and
	// OffsetFetch: member metadata and assignments of large groups, and
	// commits of many partitions, stay far below it (a commit of 100,000
	// partitions is about 2 MiB).
	groupRequestMax = 16 << 20
)

const apiVersionsKey = 18

// apis is the dispatch table (filled in init to break the initialisation
// cycle through the ApiVersions handler, which lists it): one entry per served API, each implemented in
// its own file. Keys left out close the connection like any unknown key.
var apis []*api

func init() {
	apis = []*api{
		{key: 0, name: "Produce", advertisedMin: 0, max: 12, handle: handleProduce, decode: decodeProduce},
		{key: 1, name: "Fetch", advertisedMin: 4, max: 12, handle: handleFetch, maxFrame: fetchRequestMax},
		{key: 2, name: "ListOffsets", advertisedMin: 1, max: 7, handle: handleListOffsets, maxFrame: smallRequestMax},
		{key: 3, name: "Metadata", advertisedMin: 0, max: 12, handle: handleMetadata, decode: decodeMetadata},
		{key: 8, name: "OffsetCommit", advertisedMin: 2, max: 8, handle: coordinated(handleOffsetCommit), maxFrame: groupRequestMax},
		{key: 9, name: "OffsetFetch", advertisedMin: 1, max: 8, handle: coordinated(handleOffsetFetch), maxFrame: groupRequestMax},
		{key: 10, name: "FindCoordinator", advertisedMin: 0, max: 4, handle: handleFindCoordinator, maxFrame: smallRequestMax},
		{key: 11, name: "JoinGroup", advertisedMin: 0, max: 9, handle: coordinated(handleJoinGroup), maxFrame: groupRequestMax},
		{key: 12, name: "Heartbeat", advertisedMin: 0, max: 4, handle: coordinated(handleHeartbeat), maxFrame: smallRequestMax},
		{key: 13, name: "LeaveGroup", advertisedMin: 0, max: 5, handle: coordinated(handleLeaveGroup), maxFrame: smallRequestMax},
		{key: 14, name: "SyncGroup", advertisedMin: 0, max: 5, handle: coordinated(handleSyncGroup), maxFrame: groupRequestMax},
		{key: 15, name: "DescribeGroups", advertisedMin: 0, max: 5, handle: coordinated(handleDescribeGroups), maxFrame: smallRequestMax},
		{key: 16, name: "ListGroups", advertisedMin: 0, max: 4, handle: handleListGroups, maxFrame: smallRequestMax},
		{key: saslHandshakeKey, name: "SaslHandshake", advertisedMin: 0, max: 1, handle: handleSaslHandshake, maxFrame: smallRequestMax},
		{key: apiVersionsKey, name: "ApiVersions", advertisedMin: 0, max: 4, handle: handleAPIVersions, maxFrame: smallRequestMax},
		{key: 19, name: "CreateTopics", advertisedMin: 2, max: 7, handle: handleCreateTopics, maxFrame: smallRequestMax},
		{key: 20, name: "DeleteTopics", advertisedMin: 1, max: 6, handle: handleDeleteTopics, maxFrame: smallRequestMax},
		{key: 21, name: "DeleteRecords", advertisedMin: 0, max: 2, handle: handleDeleteRecords, maxFrame: smallRequestMax},
		{key: 22, name: "InitProducerId", advertisedMin: 0, max: 5, handle: handleInitProducerID, maxFrame: smallRequestMax},
		{key: 23, name: "OffsetForLeaderEpoch", advertisedMin: 0, max: 4, handle: handleOffsetForLeaderEpoch, maxFrame: smallRequestMax},
		{key: 24, name: "AddPartitionsToTxn", advertisedMin: 0, max: 4, handle: handleAddPartitionsToTxn, maxFrame: smallRequestMax},
		{key: 25, name: "AddOffsetsToTxn", advertisedMin: 0, max: 4, handle: handleAddOffsetsToTxn, maxFrame: smallRequestMax},
		{key: 26, name: "EndTxn", advertisedMin: 0, max: 4, handle: handleEndTxn, maxFrame: smallRequestMax},
		{key: 27, name: "WriteTxnMarkers", advertisedMin: 0, max: 1, handle: handleWriteTxnMarkers, maxFrame: smallRequestMax},
		{key: 28, name: "TxnOffsetCommit", advertisedMin: 0, max: 4, handle: handleTxnOffsetCommit, maxFrame: groupRequestMax},
		{key: 29, name: "DescribeAcls", advertisedMin: 1, max: 3, handle: handleDescribeAcls, maxFrame: smallRequestMax},
		{key: 30, name: "CreateAcls", advertisedMin: 1, max: 3, handle: handleCreateAcls, maxFrame: smallRequestMax},
		{key: 31, name: "DeleteAcls", advertisedMin: 1, max: 3, handle: handleDeleteAcls, maxFrame: smallRequestMax},
		{key: 32, name: "DescribeConfigs", advertisedMin: 1, max: 4, handle: handleDescribeConfigs, maxFrame: smallRequestMax},
		{key: 33, name: "AlterConfigs", advertisedMin: 0, max: 2, handle: handleAlterConfigs, maxFrame: smallRequestMax},
		{key: 35, name: "DescribeLogDirs", advertisedMin: 1, max: 4, handle: handleDescribeLogDirs, maxFrame: smallRequestMax},
		{key: saslAuthenticateKey, name: "SaslAuthenticate", advertisedMin: 0, max: 2, handle: handleSaslAuthenticate, maxFrame: smallRequestMax},
		{key: 37, name: "CreatePartitions", advertisedMin: 0, max: 3, handle: handleCreatePartitions, maxFrame: smallRequestMax},
		{key: 42, name: "DeleteGroups", advertisedMin: 0, max: 2, handle: coordinated(handleDeleteGroups), maxFrame: smallRequestMax},
		{key: 43, name: "ElectLeaders", advertisedMin: 0, max: 2, handle: handleElectLeaders, maxFrame: smallRequestMax},
		{key: 44, name: "IncrementalAlterConfigs", advertisedMin: 0, max: 1, handle: handleIncrementalAlterConfigs, maxFrame: smallRequestMax},
		{key: 45, name: "AlterPartitionReassignments", advertisedMin: 0, max: 1, handle: handleAlterPartitionReassignments, maxFrame: smallRequestMax},
		{key: 46, name: "ListPartitionReassignments", advertisedMin: 0, max: 0, handle: handleListPartitionReassignments, maxFrame: smallRequestMax},
		{key: 50, name: "DescribeUserScramCredentials", advertisedMin: 0, max: 0, handle: handleDescribeUserScramCredentials, maxFrame: smallRequestMax},
		{key: 51, name: "AlterUserScramCredentials", advertisedMin: 0, max: 0, handle: handleAlterUserScramCredentials, maxFrame: smallRequestMax},
		{key: 55, name: "DescribeQuorum", advertisedMin: 0, max: 2, handle: handleDescribeQuorum, maxFrame: smallRequestMax},
		{key: 60, name: "DescribeCluster", advertisedMin: 0, max: 1, handle: handleDescribeCluster, maxFrame: smallRequestMax},
		{key: 61, name: "DescribeProducers", advertisedMin: 0, max: 0, handle: handleDescribeProducers, maxFrame: smallRequestMax},
		{key: 65, name: "DescribeTransactions", advertisedMin: 0, max: 0, handle: handleDescribeTransactions, maxFrame: smallRequestMax},
		{key: 66, name: "ListTransactions", advertisedMin: 0, max: 2, handle: handleListTransactions, maxFrame: smallRequestMax},
	}
	apiByKey = make(map[int16]*api, len(apis))
	for _, a := range apis {
		apiByKey[a.key] = a
	}
}

var apiByKey map[int16]*api

func lookupAPI(key int16) *api { return apiByKey[key] }
