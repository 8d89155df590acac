package server

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterAdminAPIsSingleNode: on a single node ElectLeaders,
// AlterPartitionReassignments, ListPartitionReassignments and
// DescribeQuorum are advertised and answered (the cluster's answers are in
// broker/interop's TestClusterAdminTools), and a broker-config DELETE is a
// no-op while any other broker-config change is still refused.
func TestClusterAdminAPIsSingleNode(t *testing.T) {
	ts := startServer(t, "", nil)
	ctx := testCtx(t)
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "adm"); err != nil {
		t.Fatal(err)
	}
	versions := roundTrip(t, ts.addr, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	advertised := map[int16]int16{}
	for _, k := range versions.ApiKeys {
		advertised[k.ApiKey] = k.MaxVersion
	}
	for key, max := range map[int16]int16{43: 2, 45: 1, 46: 0, 55: 2} {
		if advertised[key] != max {
			t.Errorf("ApiVersions: key %d max %d, want %d", key, advertised[key], max)
		}
	}

	el := kmsg.NewPtrElectLeadersRequest()
	for _, name := range []string{"adm", "missing"} {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = name, []int32{0, 1}
		el.Topics = append(el.Topics, rt)
	}
	got := roundTrip(t, ts.addr, el).(*kmsg.ElectLeadersResponse)
	want := map[string]int16{"adm": kerr.ElectionNotNeeded.Code, "missing": kerr.UnknownTopicOrPartition.Code}
	if len(got.Topics) != 2 {
		t.Fatalf("ElectLeaders: %+v", got.Topics)
	}
	for _, rt := range got.Topics {
		if len(rt.Partitions) != 2 {
			t.Fatalf("ElectLeaders %s: %+v", rt.Topic, rt.Partitions)
		}
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != want[rt.Topic] || rp.ErrorMessage == nil {
				t.Errorf("ElectLeaders %s-%d: code %d (%v), want %d with a message", rt.Topic, rp.Partition, rp.ErrorCode, rp.ErrorMessage, want[rt.Topic])
			}
		}
	}
	all := kmsg.NewPtrElectLeadersRequest() // Topics null: all; nothing needed is left out
	if got := roundTrip(t, ts.addr, all).(*kmsg.ElectLeadersResponse); got.ErrorCode != 0 || len(got.Topics) != 0 {
		t.Errorf("ElectLeaders of all partitions: %+v", got)
	}

	ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at.Topic = "adm"
	for p, replicas := range [][]int32{{ts.cfg.NodeID}, nil} {
		ap := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		ap.Partition, ap.Replicas = int32(p), replicas
		at.Partitions = append(at.Partitions, ap)
	}
	moved := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	moved.Partition, moved.Replicas = 0, []int32{ts.cfg.NodeID + 1}
	mt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	mt.Topic, mt.Partitions = "missing", []kmsg.AlterPartitionAssignmentsRequestTopicPartition{moved}
	ar.Topics = append(ar.Topics, at, mt)
	agot := roundTrip(t, ts.addr, ar).(*kmsg.AlterPartitionAssignmentsResponse)
	var codes []int16
	for _, rt := range agot.Topics {
		for _, rp := range rt.Partitions {
			codes = append(codes, rp.ErrorCode)
		}
	}
	if wantCodes := []int16{0, kerr.NoReassignmentInProgress.Code, kerr.UnknownTopicOrPartition.Code}; len(codes) != 3 ||
		codes[0] != wantCodes[0] || codes[1] != wantCodes[1] || codes[2] != wantCodes[2] {
		t.Errorf("AlterPartitionReassignments codes %v, want %v", codes, wantCodes)
	}
	ar2 := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	at2 := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	at2.Topic = "adm"
	mv := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	mv.Partition, mv.Replicas = 1, []int32{ts.cfg.NodeID + 1}
	at2.Partitions = append(at2.Partitions, mv)
	ar2.Topics = append(ar2.Topics, at2)
	if got := roundTrip(t, ts.addr, ar2).(*kmsg.AlterPartitionAssignmentsResponse); got.Topics[0].Partitions[0].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Errorf("a reassignment that moves a replica: %+v", got.Topics)
	}

	if got := roundTrip(t, ts.addr, kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse); got.ErrorCode != 0 || len(got.Topics) != 0 {
		t.Errorf("ListPartitionReassignments: %+v", got)
	}
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.Version = 2
	if got := roundTrip(t, ts.addr, dq).(*kmsg.DescribeQuorumResponse); got.ErrorCode != kerr.InvalidRequest.Code || got.ErrorMessage == nil {
		t.Errorf("DescribeQuorum: %+v", got)
	}

	for op, wantCode := range map[kmsg.IncrementalAlterConfigOp]int16{incrementalDelete: 0, 0 /* SET */ : kerr.InvalidRequest.Code} {
		ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = resourceBroker, "1"
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = "leader.replication.throttled.rate", op, kmsg.StringPtr("1000")
		r.Configs = append(r.Configs, c)
		ia.Resources = append(ia.Resources, r)
		if got := roundTrip(t, ts.addr, ia).(*kmsg.IncrementalAlterConfigsResponse); got.Resources[0].ErrorCode != wantCode {
			t.Errorf("IncrementalAlterConfigs of a broker config, op %d: code %d, want %d", op, got.Resources[0].ErrorCode, wantCode)
		}
	}
}
