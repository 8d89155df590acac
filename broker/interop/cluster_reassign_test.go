package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createAssigned creates topic with an explicit replica assignment
// (assignment[p] lists partition p's replicas, preferred leader first).
func createAssigned(t *testing.T, c *brokerCluster, topic string, assignment [][]int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, replicas := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(c.ids()[0], req)
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if got := resp.(*kmsg.CreateTopicsResponse).Topics; len(got) != 1 || got[0].ErrorCode != 0 {
		t.Fatalf("create %s: %+v", topic, got)
	}
}

// waitMoved waits until no move of topic is listed by any broker and every
// broker's Metadata shows each partition with exactly its target replicas
// (in order), all of them in the ISR, led by one of them.
func (c *brokerCluster) waitMoved(topic string, targets map[int32][]int32, asked ...int32) map[int32]partitionView {
	c.t.Helper()
	var view map[int32]partitionView
	eventually(c.t, 60*time.Second, fmt.Sprintf("the moves of %s to %v finish", topic, targets), func() error {
		for _, id := range asked {
			resp, err := c.request(id, kmsg.NewPtrListPartitionReassignmentsRequest())
			if err != nil {
				return err
			}
			if got := resp.(*kmsg.ListPartitionReassignmentsResponse).Topics; len(got) > 0 {
				return fmt.Errorf("broker %d lists moves in progress: %+v", id, got)
			}
			v, err := c.topicView(id, topic)
			if err != nil {
				return err
			}
			for p, target := range targets {
				pv := v[p]
				if !slices.Equal(pv.Replicas, target) || !slices.Equal(pv.ISR, sorted(target)) || !slices.Contains(target, pv.Leader) {
					return fmt.Errorf("broker %d: partition %d: %+v, target %v", id, p, pv, target)
				}
			}
			view = v
		}
		return nil
	})
	return view
}

// TestClusterReassignUnderLoad moves the replicas of a topic while
// acks=all idempotent producers write to it (min.insync.replicas 2): p0
// from [1 2] to [3 2] (its leader 1 leaves, 3 leads), p1 from [2 1] to
// [2 3] (its leader stays). While moving, ListPartitionReassignments
// reports adding and removing replicas; afterwards broker 1 holds no
// replica of the topic (its logs deleted), no acknowledged record is lost
// or doubled (the history checker), and 3's batches equal 2's by CRC.
func TestClusterReassignUnderLoad(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("moved")
	createAssigned(t, c, topic, [][]int32{{1, 2}, {2, 1}}, map[string]string{"min.insync.replicas": "2"})
	c.fullISR(topic, 2, 1, 1, 2)
	h := newClusterHistory(t)
	g := h.producers(c.client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, 3)
	defer g.halt()
	g.awaitAcked(100, "before the move")

	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	targets := map[int32][]int32{0: {3, 2}, 1: {2, 3}}
	var req kadm.AlterPartitionAssignmentsReq
	for p, target := range targets {
		req.Assign(topic, p, target)
	}
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("%s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	// The move is listed with its adding and removing replicas unless it
	// already finished; what is listed must be exactly Kafka's shape.
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range listed.Sorted() {
		want := map[int32][3][]int32{0: {{3, 2, 1}, {3}, {1}}, 1: {{2, 3, 1}, {3}, {1}}}[l.Partition]
		if !slices.Equal(l.Replicas, want[0]) || !slices.Equal(l.AddingReplicas, want[1]) || !slices.Equal(l.RemovingReplicas, want[2]) {
			t.Errorf("listed move of %s-%d: replicas %v adding %v removing %v, want %v", topic, l.Partition, l.Replicas, l.AddingReplicas, l.RemovingReplicas, want)
		}
	}
	t.Logf("listed right after the request: %d moving partitions", len(listed.Sorted()))
	view := c.waitMoved(topic, targets, c.ids()...)
	if view[0].Leader != 3 {
		t.Errorf("p0's leader after its leader left: %d, want 3 (the first target replica)", view[0].Leader)
	}
	eventually(t, 30*time.Second, "broker 1 deletes its replicas of "+topic, func() error {
		if dirs := c.partitionDirs(1, topic); len(dirs) > 0 {
			return fmt.Errorf("broker 1 still holds partitions %v", dirs)
		}
		return nil
	})
	g.awaitAcked(100, "after the move")
	g.halt()
	ends := c.endOffsets(topic)
	read := h.finalRead(c, topic)
	stats := h.check()
	compared := c.checkReplicasIdentical(topic, 2, ends, 2, 3)
	t.Logf("acked %d, unacked %d, read %d, batches compared %d, ends %v, %+v", g.acked, g.unacked, read, compared, ends, stats)
	if g.acked < 200 {
		t.Errorf("only %d produces acknowledged", g.acked)
	}
}

// TestClusterReassignCLI drives `sluice topics reassign`: a move given by
// flags, --verify until it completed (exit status 1 before), a move back
// from a reassignment file in Kafka's format, a cancel with no move in
// progress refused with the broker's reason, and bad input refused.
func TestClusterReassignCLI(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("cli-moved")
	createAssigned(t, c, topic, [][]int32{{1, 2}}, nil)
	c.fullISR(topic, 1, 1, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	bootstrap := strings.Join(c.bootstrap(), ",")
	reassign := func(args ...string) (string, error) {
		out, errOut, err := sluiceCLI(t, ctx, "", append([]string{"topics", "reassign", "--bootstrap", bootstrap}, args...)...)
		t.Logf("sluice topics reassign %v: %v\n%s%s", args, err, out, errOut)
		return out + errOut, err
	}
	verified := func(args ...string) {
		t.Helper()
		eventually(t, 40*time.Second, "sluice topics reassign --verify "+strings.Join(args, " "), func() error {
			out, err := reassign(append(args, "--verify")...)
			if err != nil || !strings.Contains(out, topic+"-0: completed") {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	out, err := reassign("--topic", topic, "--partition", "0", "--replicas", "3,1")
	if err != nil || !strings.Contains(out, topic+"-0: moving to [3 1]") {
		t.Fatalf("reassign by flags: %v\n%s", err, out)
	}
	verified("--topic", topic, "--partition", "0", "--replicas", "3,1")
	c.waitMoved(topic, map[int32][]int32{0: {3, 1}}, c.ids()...)

	plan := filepath.Join(t.TempDir(), "plan.json")
	js := fmt.Sprintf(`{"version":1,"partitions":[{"topic":%q,"partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}`, topic)
	if err := os.WriteFile(plan, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := reassign("--reassignment-json-file", plan); err != nil {
		t.Fatalf("reassign from a file: %v\n%s", err, out)
	}
	verified("--reassignment-json-file", plan)
	c.waitMoved(topic, map[int32][]int32{0: {1, 2}}, c.ids()...)

	if out, err := reassign("--reassignment-json-file", plan, "--cancel"); err == nil || !strings.Contains(out, "NO_REASSIGNMENT_IN_PROGRESS") {
		t.Errorf("a cancel with no move in progress: %v\n%s", err, out)
	}
	for _, bad := range [][]string{
		{"--topic", topic, "--partition", "0"},
		{"--topic", topic, "--partition", "0", "--replicas", "1,9"},
		{"--reassignment-json-file", plan, "--topic", topic},
	} {
		if out, err := reassign(bad...); err == nil {
			t.Errorf("reassign %v succeeded:\n%s", bad, out)
		}
	}
}
