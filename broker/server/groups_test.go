package server

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// groupProps are broker properties for group tests: a short join delay.
func groupProps(t testing.TB, extra map[string]string) func(*config.Broker) {
	props := map[string]string{"group.initial.rebalance.delay.ms": "200", "offsets.topic.num.partitions": "4"}
	for k, v := range extra {
		props[k] = v
	}
	b, err := config.FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *config.Broker) { *c = b }
}

// waitGroup polls DescribeGroups until the group is Stable with n members
// and every member has an assignment.
func waitGroup(t testing.TB, adm *kadm.Client, group string, n int) kadm.DescribedGroup {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last kadm.DescribedGroup
	for time.Now().Before(deadline) {
		ds, err := adm.DescribeGroups(context.Background(), group)
		if err == nil {
			last = ds[group]
			if last.State == "Stable" && len(last.Members) == n {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("group %s never became Stable with %d members: last %s with %d", group, n, last.State, len(last.Members))
	return last
}

func TestGroupConsumersSharePartitions(t *testing.T) {
	for _, balancer := range []struct {
		name string
		opt  kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		t.Run(balancer.name, func(t *testing.T) {
			ts := startServer(t, "", groupProps(t, nil))
			ctx := testCtx(t)
			adm := kadm.NewClient(newClient(t, ts.addr))
			topic := "orders-" + balancer.name
			if _, err := adm.CreateTopic(ctx, 6, 1, nil, topic); err != nil {
				t.Fatal(err)
			}
			const group, perPartition = "g", 50
			members := make([]*kgo.Client, 3)
			for i := range members {
				members[i] = newClient(t, ts.addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
					kgo.Balancers(balancer.opt), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
					kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
			}
			// Members join when they first poll.
			var mu sync.Mutex
			seen := map[string]int{}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i, cl := range members {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						fs := cl.PollFetches(pctx)
						cancel()
						fs.EachRecord(func(r *kgo.Record) {
							mu.Lock()
							seen[string(r.Value)]++
							mu.Unlock()
						})
						_ = i
					}
				}()
			}
			d := waitGroup(t, adm, group, 3)
			assigned := 0
			for _, m := range d.Members {
				ca, ok := m.Assigned.AsConsumer()
				if !ok {
					t.Fatalf("member %s: assignment is not a consumer assignment", m.MemberID)
				}
				for _, tp := range ca.Topics {
					assigned += len(tp.Partitions)
				}
			}
			if assigned != 6 {
				t.Fatalf("assigned partitions: %d, want 6", assigned)
			}
			rec := httptest.NewRecorder()
			ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			for _, want := range []string{`sluice_group_groups{state="Stable"} 1`, "sluice_group_members 3", "sluice_group_generations_total"} {
				if !strings.Contains(rec.Body.String(), want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			prod := newClient(t, ts.addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			for p := int32(0); p < 6; p++ {
				for i := 0; i < perPartition; i++ {
					prod.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))}, nil)
				}
			}
			if err := prod.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n == 6*perPartition || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 6*perPartition {
				t.Fatalf("consumed %d distinct records, want %d", len(seen), 6*perPartition)
			}
			for v, n := range seen {
				if n != 1 {
					t.Fatalf("record %s consumed %d times", v, n)
				}
			}
			// Commits reached the coordinator.
			for _, cl := range members {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Fatalf("commit: %v", err)
				}
			}
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < 6; p++ {
				if o, ok := offs.Lookup(topic, p); !ok || o.At != perPartition {
					t.Errorf("committed offset of partition %d: %+v, want %d", p, o, perPartition)
				}
			}
		})
	}
}

func TestGroupAPIsAnswerRawRequests(t *testing.T) {
	ts := startServer(t, "", groupProps(t, nil))
	// FindCoordinator v0 and v4 (batched).
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	r0 := roundTrip(t, ts.addr, fc).(*kmsg.FindCoordinatorResponse)
	if r0.ErrorCode != 0 || r0.NodeID != 0 || r0.Port == 0 {
		t.Fatalf("FindCoordinator v0: %+v", r0)
	}
	fc4 := kmsg.NewPtrFindCoordinatorRequest()
	fc4.Version = 4
	fc4.CoordinatorKeys = []string{"a", "b", "a", ""}
	r4 := roundTrip(t, ts.addr, fc4).(*kmsg.FindCoordinatorResponse)
	if len(r4.Coordinators) != 3 || r4.Coordinators[2].ErrorCode == 0 {
		t.Fatalf("FindCoordinator v4: %+v", r4.Coordinators)
	}
	// The offsets topic exists now, compacted.
	tp, ok := ts.topics.get("__consumer_offsets")
	if !ok || len(tp.parts) != 4 || tp.cfg.CleanupPolicy != "compact" {
		t.Fatalf("offsets topic: %v %+v", ok, tp)
	}
	// JoinGroup v0 (no member-id round trip) answers at once for one member
	// once the initial delay has passed.
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.SessionTimeoutMillis, jg.ProtocolType = "g", 6000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	jg.Protocols = append(jg.Protocols, p)
	jr := roundTrip(t, ts.addr, jg).(*kmsg.JoinGroupResponse)
	if jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID {
		t.Fatalf("JoinGroup v0: %+v", jr)
	}
	bad := kmsg.NewPtrJoinGroupRequest()
	bad.Group, bad.SessionTimeoutMillis, bad.ProtocolType = "g", 10, "consumer"
	bad.Protocols = jg.Protocols
	if r := roundTrip(t, ts.addr, bad).(*kmsg.JoinGroupResponse); r.ErrorCode != 26 { // INVALID_SESSION_TIMEOUT
		t.Fatalf("session timeout 10 ms: %d", r.ErrorCode)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.Version = 4
	lr := roundTrip(t, ts.addr, lg).(*kmsg.ListGroupsResponse)
	if len(lr.Groups) != 1 || lr.Groups[0].GroupState != "CompletingRebalance" {
		t.Fatalf("ListGroups: %+v", lr.Groups)
	}
}

func FuzzFindCoordinator(f *testing.F) { fuzzAPI(f, 10) }
func FuzzJoinGroup(f *testing.F)       { fuzzAPI(f, 11) }
func FuzzHeartbeat(f *testing.F)       { fuzzAPI(f, 12) }
func FuzzLeaveGroup(f *testing.F)      { fuzzAPI(f, 13) }
func FuzzSyncGroup(f *testing.F)       { fuzzAPI(f, 14) }
func FuzzDescribeGroups(f *testing.F)  { fuzzAPI(f, 15) }
func FuzzListGroups(f *testing.F)      { fuzzAPI(f, 16) }
func FuzzOffsetCommit(f *testing.F)    { fuzzAPI(f, 8) }
func FuzzOffsetFetch(f *testing.F)     { fuzzAPI(f, 9) }
func FuzzDeleteGroups(f *testing.F)    { fuzzAPI(f, 42) }

func TestProduceToOffsetsTopicRefused(t *testing.T) {
	ts := startServer(t, "", groupProps(t, nil))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g" // creates __consumer_offsets
	roundTrip(t, ts.addr, fc)
	cl := newClient(t, ts.addr)
	if sp := produceRaw(t, cl, "__consumer_offsets", 0, -1, makeBatch(-1, -1, -1, 1, "x")); sp.ErrorCode != 17 { // INVALID_TOPIC_EXCEPTION
		t.Fatalf("produce to the offsets topic: error %d", sp.ErrorCode)
	}
}

// TestOffsetsTopicDeletedAndRecreated: an administrator deletes
// __consumer_offsets; the next commit recreates it.
func TestOffsetsTopicDeletedAndRecreated(t *testing.T) {
	ts := startServer(t, "", groupProps(t, nil))
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, ts.addr))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	commit := func(at int64) {
		t.Helper()
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: "t", Partition: 0, At: at, LeaderEpoch: -1})
		r, err := adm.CommitOffsets(ctx, "g", o)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", at, err)
		}
	}
	commit(1)
	if code, msg := ts.topics.delete("__consumer_offsets"); code != 0 {
		t.Fatal(msg)
	}
	commit(2)
	if _, ok := ts.topics.get("__consumer_offsets"); !ok {
		t.Fatal("the offsets topic was not recreated")
	}
	offs, err := adm.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup("t", 0); o.At != 2 {
		t.Fatalf("committed %d, want 2", o.At)
	}
}
