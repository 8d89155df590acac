package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// Main classes of the Kafka 4.1 admin tools this test runs.
const (
	leaderElectionClass    = "org.apache.kafka.tools.LeaderElectionCommand"
	reassignPartitionClass = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
	metadataQuorumClass    = "org.apache.kafka.tools.MetadataQuorumCommand"
)

// TestClusterAdminTools runs Kafka 4.1's admin tools against a three-broker
// cluster for the APIs a cluster adds (ElectLeaders,
// ListPartitionReassignments, AlterPartitionReassignments, DescribeQuorum):
// each tool gets an answer and ends with a clear message, never a closed
// connection or a timeout; kafka-reassign-partitions --execute moves the
// replicas and --verify sees the move completed. The preferred election is checked by its effect:
// the preferred replica leads again.
func TestClusterAdminTools(t *testing.T) {
	c := startBrokerCluster(t, 3, "auto.leader.rebalance.enable=false")
	topic := newTopicName("admin")
	createReplicated(t, c, topic, 1, 3)
	before := c.waitLeaders(topic, 1, c.ids()...)[0]
	preferred := before.Replicas[0]
	if before.Leader != preferred {
		t.Fatalf("a new partition is led by %d, not its preferred replica %d", before.Leader, preferred)
	}
	bootstrap := strings.Join(c.bootstrap(), ",")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tool := func(class string, args ...string) (string, error) {
		t.Helper()
		start := time.Now()
		res, err := kafka.JavaTool(t, ctx, nil, class, append([]string{"--bootstrap-server", bootstrap}, args...)...)
		out := string(res.Stdout) + string(res.Stderr)
		t.Logf("%s %v (%v): err=%v\n%s", class[strings.LastIndex(class, ".")+1:], args, time.Since(start).Round(time.Millisecond), err, out)
		for _, bad := range []string{"TimeoutException", "DisconnectException", "disconnected", "UnsupportedVersionException"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s %v: the tool saw %s:\n%s", class, args, bad, out)
			}
		}
		return out, err
	}

	// The preferred leader is killed and comes back: another broker leads
	// until an election on demand.
	c.brokers[preferred].Kill()
	var live []int32
	for _, id := range c.ids() {
		if id != preferred {
			live = append(live, id)
		}
	}
	moved := c.waitLeaders(topic, 1, live...)[0]
	// While it is dead the election is refused with a reason.
	out, err := tool(leaderElectionClass, "--election-type", "preferred", "--topic", topic, "--partition", "0")
	if err == nil || !strings.Contains(out, "PreferredLeaderNotAvailableException") || !strings.Contains(out, "is not live and in the ISR") {
		t.Errorf("a preferred election while the preferred replica is dead should fail with sluice's reason: %v\n%s", err, out)
	}
	c.brokers[preferred].Restart(t)
	c.waitBrokers(c.ids()...)
	eventually(t, 30*time.Second, "the restarted preferred replica is back in the ISR", func() error {
		v, err := c.topicView(live[0], topic)
		if err != nil {
			return err
		}
		if len(v[0].ISR) != 3 || v[0].Leader == preferred {
			return fmt.Errorf("%+v", v[0])
		}
		return nil
	})
	out, err = tool(leaderElectionClass, "--election-type", "preferred", "--topic", topic, "--partition", "0")
	if err != nil || !strings.Contains(out, "Successfully completed leader election (PREFERRED) for partitions "+topic+"-0") {
		t.Fatalf("preferred election: %v\n%s", err, out)
	}
	after := c.waitLeaders(topic, 1, c.ids()...)[0]
	if after.Leader != preferred || after.Epoch <= moved.Epoch {
		t.Fatalf("after the election: leader %d epoch %d, want the preferred replica %d with an epoch above %d", after.Leader, after.Epoch, preferred, moved.Epoch)
	}
	// Again: nothing to do, said so.
	out, err = tool(leaderElectionClass, "--election-type", "preferred", "--all-topic-partitions")
	if err != nil || strings.Contains(out, "Successfully completed") {
		t.Errorf("a second election (all partitions) should do nothing and succeed: %v\n%s", err, out)
	}
	out, err = tool(leaderElectionClass, "--election-type", "preferred", "--topic", topic, "--partition", "0")
	if err != nil || !strings.Contains(out, "Valid replica already elected for partitions "+topic+"-0") {
		t.Errorf("an election of the partition its preferred replica leads: %v\n%s", err, out)
	}
	// Unclean: the partition has a leader.
	out, err = tool(leaderElectionClass, "--election-type", "unclean", "--topic", topic, "--partition", "0")
	if err != nil || !strings.Contains(out, "Valid replica already elected") {
		t.Errorf("an unclean election of a led partition: %v\n%s", err, out)
	}

	// Reassignments: none in progress; the current assignment verifies as
	// complete.
	out, err = tool(reassignPartitionClass, "--list")
	if err != nil || !strings.Contains(out, "No partition reassignments found") {
		t.Errorf("reassign --list: %v\n%s", err, out)
	}
	plan := func(replicas []int32) string {
		f := filepath.Join(t.TempDir(), "plan.json")
		js := fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":%s}]}`, topic, strings.ReplaceAll(fmt.Sprint(replicas), " ", ","))
		if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	current := plan(after.Replicas)
	out, err = tool(reassignPartitionClass, "--verify", "--reassignment-json-file", current)
	if err != nil || !strings.Contains(out, "Reassignment of partition "+topic+"-0 is completed") {
		t.Errorf("reassign --verify of the current assignment: %v\n%s", err, out)
	}
	other := plan([]int32{after.Replicas[1], after.Replicas[2]})
	out, err = tool(reassignPartitionClass, "--verify", "--reassignment-json-file", other)
	if !strings.Contains(out, "There is no active reassignment of partition "+topic+"-0") {
		t.Errorf("reassign --verify of another assignment: %v\n%s", err, out)
	}
	// --execute of another assignment moves the replicas (dropping the
	// preferred replica: replication factor 3 to 2); --verify reports it
	// completed, and the dropped broker's log is deleted.
	out, err = tool(reassignPartitionClass, "--execute", "--reassignment-json-file", other)
	if err != nil || !strings.Contains(out, "Successfully started partition reassignment") {
		t.Fatalf("reassign --execute of another assignment: %v\n%s", err, out)
	}
	eventually(t, 60*time.Second, "kafka-reassign-partitions --verify reports the move completed", func() error {
		out, err := tool(reassignPartitionClass, "--verify", "--reassignment-json-file", other)
		if err != nil || !strings.Contains(out, "Reassignment of partition "+topic+"-0 is completed") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	want := []int32{after.Replicas[1], after.Replicas[2]}
	moved2 := c.waitMoved(topic, map[int32][]int32{0: want}, want...)
	eventually(t, 30*time.Second, "the dropped replica's log is deleted", func() error {
		if dirs := c.partitionDirs(after.Replicas[0], topic); len(dirs) > 0 {
			return fmt.Errorf("broker %d still holds %v", after.Replicas[0], dirs)
		}
		return nil
	})
	t.Logf("after the move: %+v", moved2[0])

	// DescribeQuorum: no KRaft quorum, said at once.
	out, err = tool(metadataQuorumClass, "describe", "--status")
	if err == nil || !strings.Contains(out, "not KRaft") {
		t.Errorf("metadata-quorum describe should fail with sluice's message: %v\n%s", err, out)
	}

	// The wire answers the tools read, from a broker that is not the
	// controller too.
	for _, id := range c.ids() {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType = 0
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic+"-missing", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := c.request(id, req)
		if err != nil {
			t.Fatalf("broker %d: ElectLeaders: %v", id, err)
		}
		got := resp.(*kmsg.ElectLeadersResponse)
		if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != 1 || got.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("broker %d: ElectLeaders of an unknown partition: %+v", id, got.Topics)
		}
		cancelReq := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		ct := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		cp.Partition = 0 // Replicas nil: cancel
		ct.Partitions = append(ct.Partitions, cp)
		cancelReq.Topics = append(cancelReq.Topics, ct)
		aresp, err := c.request(id, cancelReq)
		if err != nil {
			t.Fatalf("broker %d: AlterPartitionReassignments: %v", id, err)
		}
		ag := aresp.(*kmsg.AlterPartitionAssignmentsResponse)
		if len(ag.Topics) != 1 || len(ag.Topics[0].Partitions) != 1 || ag.Topics[0].Partitions[0].ErrorCode != kerr.NoReassignmentInProgress.Code {
			t.Errorf("broker %d: cancelling a reassignment: %+v", id, ag.Topics)
		}
	}
}
