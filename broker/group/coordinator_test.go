package group

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableGroup forms a group of two dynamic members and returns (leader,
// follower, generation).
func stableGroup(t *testing.T, f *fixture, group string) (string, string, int32) {
	t.Helper()
	a, cha := f.newMember(group)
	b, chb := f.newMember(group)
	f.clock.Advance(3 * time.Second) // group.initial.rebalance.delay.ms
	ra, rb := wait(t, f.c, cha), wait(t, f.c, chb)
	if ra.ErrorCode != 0 || rb.ErrorCode != 0 || ra.Generation != rb.Generation || ra.LeaderID != rb.LeaderID {
		t.Fatalf("join answers: %+v / %+v", ra, rb)
	}
	leader, follower := a, b
	if ra.LeaderID == b {
		leader, follower = b, a
	}
	lr := ra
	if leader == b {
		lr = rb
	}
	if len(lr.Members) != 2 {
		t.Fatalf("leader got %d members, want 2", len(lr.Members))
	}
	fs := f.sync(group, follower, ra.Generation, nil)
	ls := wait(t, f.c, f.sync(group, leader, ra.Generation, map[string]string{leader: "L", follower: "F"}))
	if ls.ErrorCode != 0 || string(ls.MemberAssignment) != "L" {
		t.Fatalf("leader sync: code %d assignment %q", ls.ErrorCode, ls.MemberAssignment)
	}
	if r := wait(t, f.c, fs); r.ErrorCode != 0 || string(r.MemberAssignment) != "F" {
		t.Fatalf("follower sync: code %d assignment %q", r.ErrorCode, r.MemberAssignment)
	}
	if s := f.state(group); s != "Stable" {
		t.Fatalf("state %s, want Stable", s)
	}
	return leader, follower, ra.Generation
}

func TestJoinSyncHeartbeatFencing(t *testing.T) {
	f := newFixture(t)
	leader, follower, gen := stableGroup(t, f, "g")
	for _, c := range []struct {
		member string
		gen    int32
		want   int16
	}{
		{leader, gen, 0}, {follower, gen, 0},
		{follower, gen - 1, kerr.IllegalGeneration.Code},
		{"nobody", gen, kerr.UnknownMemberID.Code},
	} {
		if got := f.heartbeat("g", c.member, c.gen); got != c.want {
			t.Errorf("heartbeat %s gen %d: %d, want %d", c.member, c.gen, got, c.want)
		}
	}
	// A stale commit is fenced; a current one is stored.
	if code := f.commit("g", follower, gen-1, "t", 0, 5); code != kerr.IllegalGeneration.Code {
		t.Errorf("stale commit: %d", code)
	}
	if code := f.commit("g", follower, gen, "t", 0, 5); code != 0 {
		t.Errorf("commit: %d", code)
	}
	if code := f.commit("g", follower, gen, "nosuch", 0, 5); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("commit to an unknown topic: %d", code)
	}
	// A third member triggers a rebalance: heartbeats say so, commits of the
	// old generation still work while the group prepares the rebalance.
	c, chc := f.newMember("g")
	if got := f.heartbeat("g", leader, gen); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat during rebalance: %d", got)
	}
	if code := f.commit("g", follower, gen, "t", 1, 7); code != 0 {
		t.Errorf("commit while preparing a rebalance: %d", code)
	}
	cha := f.joinAsync(joinReq("g", leader, nil, 9))
	chb := f.joinAsync(joinReq("g", follower, nil, 9))
	for _, ch := range []<-chan *kmsg.JoinGroupResponse{cha, chb, chc} {
		if r := wait(t, f.c, ch); r.ErrorCode != 0 || r.Generation != gen+1 {
			t.Fatalf("rejoin: code %d generation %d", r.ErrorCode, r.Generation)
		}
	}
	if code := f.commit("g", c, gen+1, "t", 0, 9); code != kerr.RebalanceInProgress.Code {
		t.Errorf("commit while awaiting the assignment: %d", code)
	}
	if s := f.state("g"); s != "CompletingRebalance" {
		t.Errorf("state %s", s)
	}
}

func TestSessionExpiryMovesPartitions(t *testing.T) {
	f := newFixture(t)
	leader, follower, gen := stableGroup(t, f, "g")
	f.clock.Advance(6 * time.Second)
	f.c.Tick()
	if got := f.heartbeat("g", leader, gen); got != 0 {
		t.Fatalf("heartbeat: %d", got)
	}
	f.clock.Advance(4 * time.Second) // follower silent for 10 s = its session timeout
	f.c.Tick()
	if got := f.heartbeat("g", follower, gen); got != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member's heartbeat: %d, want UNKNOWN_MEMBER_ID", got)
	}
	if got := f.heartbeat("g", leader, gen); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("survivor's heartbeat: %d, want REBALANCE_IN_PROGRESS", got)
	}
	r := wait(t, f.c, f.joinAsync(joinReq("g", leader, nil, 9)))
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 || r.LeaderID != leader {
		t.Fatalf("rejoin alone: %+v", r)
	}
}

func TestRebalanceTimeoutDropsSilentMember(t *testing.T) {
	f := newFixture(t)
	leader, follower, gen := stableGroup(t, f, "g")
	ch := f.joinAsync(joinReq("g", leader, nil, 9)) // the leader rejoins: a rebalance
	f.waitJoining("g", leader, ch)
	// The follower keeps its session alive but never rejoins.
	for i := 0; i < 29; i++ {
		f.clock.Advance(time.Second)
		if code := f.heartbeat("g", follower, gen); code != kerr.RebalanceInProgress.Code {
			t.Fatalf("follower heartbeat during the rebalance: %d", code)
		}
		f.c.Tick()
	}
	select {
	case r := <-ch:
		t.Fatalf("join answered before the rebalance timeout: %+v", r)
	default:
	}
	f.clock.Advance(time.Second)
	r := wait(t, f.c, ch)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("after the rebalance timeout: %+v", r)
	}
}

func TestInitialRebalanceDelay(t *testing.T) {
	f := newFixture(t)
	_, cha := f.newMember("g")
	f.clock.Advance(2 * time.Second)
	_, chb := f.newMember("g")
	f.c.Tick()
	f.clock.Advance(2 * time.Second) // 4 s after the first: the second extended the delay
	f.c.Tick()
	select {
	case r := <-cha:
		t.Fatalf("answered inside the extended delay: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	f.clock.Advance(time.Second)
	ra, rb := wait(t, f.c, cha), wait(t, f.c, chb)
	if ra.Generation != 1 || rb.Generation != 1 {
		t.Fatalf("both members in one generation: %d %d", ra.Generation, rb.Generation)
	}
}

func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	f := newFixture(t)
	inst := "consumer-1"
	leader, chl := f.newMember("g")
	chs := f.joinAsync(joinReq("g", "", &inst, 9)) // static: no member-id round trip
	f.waitMembers("g", 2)
	f.clock.Advance(3 * time.Second)
	rl, rs := wait(t, f.c, chl), wait(t, f.c, chs)
	if rl.ErrorCode != 0 || rs.ErrorCode != 0 || rl.LeaderID != leader {
		t.Fatalf("joins: %+v / %+v", rl, rs)
	}
	old, gen := rs.MemberID, rs.Generation
	fs := f.sync("g", old, gen, nil)
	wait(t, f.c, f.sync("g", leader, gen, map[string]string{leader: "L", old: "S"}))
	if r := wait(t, f.c, fs); string(r.MemberAssignment) != "S" {
		t.Fatalf("static member's assignment %q", r.MemberAssignment)
	}

	// The static member restarts: same instance id, no member id.
	r := f.c.Join(context.Background(), joinReq("g", "", &inst, 9), Client{ID: "cl"})
	if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == old || r.MemberID == "" {
		t.Fatalf("static rejoin: %+v (old id %s)", r, old)
	}
	if s := f.state("g"); s != "Stable" {
		t.Fatalf("state after a static restart: %s, want Stable (no rebalance)", s)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation, hb.InstanceID = "g", old, gen, &inst
	if code := f.c.Heartbeat(hb).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("old incarnation's heartbeat: %d, want FENCED_INSTANCE_ID", code)
	}
	if got := wait(t, f.c, f.sync("g", r.MemberID, gen, nil)); string(got.MemberAssignment) != "S" {
		t.Fatalf("restarted static member's assignment %q", got.MemberAssignment)
	}
	// Leaving by instance id removes it and rebalances.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 5, "g"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = &inst
	lv.Members = append(lv.Members, lm)
	if code := f.c.Leave(lv).Members[0].ErrorCode; code != 0 {
		t.Fatalf("leave by instance id: %d", code)
	}
	if s := f.state("g"); s != "PreparingRebalance" {
		t.Fatalf("state after leave: %s", s)
	}
}

func TestOffsetsAndMembersSurviveRestart(t *testing.T) {
	f := newFixture(t)
	leader, follower, gen := stableGroup(t, f, "g")
	for p := int32(0); p < 6; p++ {
		if code := f.commit("g", leader, gen, "t", p, int64(100+p)); code != 0 {
			t.Fatalf("commit: %d", code)
		}
	}
	if code := f.commit("g", leader, gen, "t", 0, 42); code != 0 { // newest wins
		t.Fatal(code)
	}
	if code := f.commit("simple", "", -1, "u", 1, 7); code != 0 {
		t.Fatalf("simple commit: %d", code)
	}
	f.restart()
	if got := f.fetched("g", "t", 0); got != 42 {
		t.Errorf("t/0 after restart: %d, want 42", got)
	}
	if got := f.fetched("g", "t", 5); got != 105 {
		t.Errorf("t/5 after restart: %d, want 105", got)
	}
	if got := f.fetched("simple", "u", 1); got != 7 {
		t.Errorf("simple group after restart: %d", got)
	}
	if got := f.fetched("g", "t", 9); got != -1 {
		t.Errorf("never committed: %d", got)
	}
	// The generation is restored: members keep heartbeating, no rebalance.
	if s := f.state("g"); s != "Stable" {
		t.Fatalf("state after restart: %s", s)
	}
	for _, m := range []string{leader, follower} {
		if code := f.heartbeat("g", m, gen); code != 0 {
			t.Errorf("heartbeat of %s after restart: %d", m, code)
		}
	}
	// A v1 fetch of all partitions (null topics) lists the six commits.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, "g"
	resp := f.c.FetchOffsets(req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 6 {
		t.Errorf("fetch all: %+v", resp.Topics)
	}
}

func TestEmptyGroupOffsetsExpire(t *testing.T) {
	testSessionMs = 30 * 60 * 1000
	defer func() { testSessionMs = 10000 }()
	f := newFixture(t)
	leader, follower, gen := stableGroup(t, f, "g")
	if code := f.commit("g", leader, gen, "t", 0, 10); code != 0 {
		t.Fatal(code)
	}
	for i := 0; i < 8*24*3; i++ { // a live group's offsets never expire
		f.clock.Advance(20 * time.Minute)
		f.c.Tick()
		if f.heartbeat("g", leader, gen) != 0 || f.heartbeat("g", follower, gen) != 0 {
			t.Fatal("heartbeat failed")
		}
	}
	if got := f.fetched("g", "t", 0); got != 10 {
		t.Fatalf("offset of a live group expired: %d", got)
	}
	for _, m := range []string{leader, follower} {
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Group, lv.MemberID = "g", m
		if code := f.c.Leave(lv).ErrorCode; code != 0 {
			t.Fatalf("leave: %d", code)
		}
	}
	if s := f.state("g"); s != "Empty" {
		t.Fatalf("state: %s", s)
	}
	f.clock.Advance(7*24*time.Hour - time.Minute)
	f.c.Tick()
	if got := f.fetched("g", "t", 0); got != 10 {
		t.Fatalf("expired before offsets.retention.minutes: %d", got)
	}
	f.clock.Advance(11 * time.Minute)
	f.c.Tick()
	if got := f.fetched("g", "t", 0); got != -1 {
		t.Fatalf("not expired after the retention: %d", got)
	}
	if s := f.state("g"); s != "Dead" {
		t.Fatalf("group still listed after its offsets expired: %s", s)
	}
	f.restart()
	if got := f.fetched("g", "t", 0); got != -1 {
		t.Fatalf("expired offset back after restart: %d", got)
	}
}

func TestDeleteGroups(t *testing.T) {
	f := newFixture(t)
	stableGroup(t, f, "busy")
	if code := f.commit("idle", "", -1, "t", 0, 3); code != 0 {
		t.Fatal(code)
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"busy", "idle", "idle", "none"}
	resp := f.c.Delete(req)
	want := map[string]int16{"busy": kerr.NonEmptyGroup.Code, "idle": 0, "none": kerr.GroupIDNotFound.Code}
	if len(resp.Groups) != 3 {
		t.Fatalf("answers: %d, want 3 (deduplicated)", len(resp.Groups))
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != want[g.Group] {
			t.Errorf("delete %s: %d, want %d", g.Group, g.ErrorCode, want[g.Group])
		}
	}
	f.restart()
	if got := f.fetched("idle", "t", 0); got != -1 {
		t.Fatalf("deleted group's offset back after restart: %d", got)
	}
	lr := f.c.List(kmsg.NewPtrListGroupsRequest())
	if len(lr.Groups) != 1 || lr.Groups[0].Group != "busy" {
		t.Fatalf("groups after restart: %+v", lr.Groups)
	}
}

func TestCommitStorageFailure(t *testing.T) {
	f := newFixture(t)
	if code := f.commit("g", "", -1, "t", 0, 3); code != 0 {
		t.Fatal(code)
	}
	f.st.failAppend = true
	if code := f.commit("g", "", -1, "t", 0, 4); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("commit with a failing log: %d", code)
	}
	if got := f.fetched("g", "t", 0); got != 3 {
		t.Fatalf("a failed commit changed the offset: %d", got)
	}
}

// TestCommitReplicatedAppendCodes: an append failing with a Kafka code (a
// cluster's replicated append, mapped by the broker's Storage) answers the
// commit with that code, and the offset does not move.
func TestCommitReplicatedAppendCodes(t *testing.T) {
	f := newFixture(t)
	if code := f.commit("g", "", -1, "t", 0, 3); code != 0 {
		t.Fatal(code)
	}
	for _, e := range []*kerr.Error{kerr.NotCoordinator, kerr.RequestTimedOut, kerr.CoordinatorNotAvailable} {
		f.st.appendErr = fmt.Errorf("%w: replicated append to __consumer_offsets-0: %v", e, "cause")
		if code := f.commit("g", "", -1, "t", 0, 4); code != e.Code {
			t.Errorf("commit whose append failed with %v: code %v", e, kerr.ErrorForCode(code))
		}
		if got := f.fetched("g", "t", 0); got != 3 {
			t.Fatalf("a failed commit changed the offset: %d", got)
		}
	}
	f.st.appendErr = nil
	if code := f.commit("g", "", -1, "t", 0, 4); code != 0 || f.fetched("g", "t", 0) != 4 {
		t.Fatalf("commit after the failures: code %d, offset %d", code, f.fetched("g", "t", 0))
	}
}

func TestPartitionForMatchesKafka(t *testing.T) {
	// Java: Math.abs("my-group".hashCode()) % 50 etc., computed with Kafka's rule.
	for group, want := range map[string]int32{"": 0, "a": 97 % 50, "my-group": partitionForJava("my-group", 50)} {
		if got := partitionFor(group, 50); got != want {
			t.Errorf("partitionFor(%q) = %d, want %d", group, got, want)
		}
	}
	if javaStringHash("hello") != 99162322 {
		t.Errorf("hash of hello: %d", javaStringHash("hello"))
	}
}

func partitionForJava(s string, n int32) int32 {
	var h int32
	for _, ch := range []byte(s) {
		h = 31*h + int32(ch)
	}
	if h < 0 {
		h = -h
	}
	return h % n
}

func TestAbandonedJoinAndDuplicateCommits(t *testing.T) {
	f := newFixture(t)
	r := f.c.Join(context.Background(), joinReq("ghost", "", nil, 9), Client{ID: "cl"})
	if r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatal(r.ErrorCode)
	}
	f.clock.Advance(11 * time.Second) // the member id's session passes unused
	f.c.Tick()
	if lr := f.c.List(kmsg.NewPtrListGroupsRequest()); len(lr.Groups) != 0 {
		t.Fatalf("an abandoned join left groups: %+v", lr.Groups)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for _, off := range []int64{5, 9} {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = off
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := f.c.CommitOffsets(req)
	if ps := resp.Topics[0].Partitions; len(ps) != 2 || ps[0].ErrorCode != 0 || ps[1].ErrorCode != 0 {
		t.Fatalf("duplicate commit answers: %+v", ps)
	}
	if got := f.fetched("g", "t", 0); got != 9 {
		t.Fatalf("committed %d, want the last value 9", got)
	}
	if st := f.c.Stats(); st.Commits != 1 || st.Groups[StateEmpty] != 1 {
		t.Fatalf("stats: %+v (one commit stored)", st)
	}
}

// TestOffsetsSurviveCompaction: many commits and a deleted group, then the
// offsets topic is compacted and the coordinator reloaded from it.
func TestOffsetsSurviveCompaction(t *testing.T) {
	f := newFixture(t)
	for i := int64(1); i <= 300; i++ {
		for _, g := range []string{"keep", "gone"} {
			if code := f.commit(g, "", -1, "t", int32(i%6), i); code != 0 {
				t.Fatal(code)
			}
		}
	}
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"gone"}
	if code := f.c.Delete(req).Groups[0].ErrorCode; code != 0 {
		t.Fatal(code)
	}
	var before, after int64
	for _, l := range f.st.logs {
		before += l.Size()
		if _, err := l.Compact(); err != nil {
			t.Fatal(err)
		}
		after += l.Size()
	}
	if after > before/3 {
		t.Fatalf("compaction kept %d of %d bytes", after, before)
	}
	f.restart()
	for p := int32(0); p < 6; p++ {
		want := int64(300 - (300-int64(p))%6)
		if p == 0 {
			want = 300
		}
		if got := f.fetched("keep", "t", p); got != want {
			t.Errorf("keep t/%d after compaction and restart: %d, want %d", p, got, want)
		}
		if got := f.fetched("gone", "t", p); got != -1 {
			t.Errorf("deleted group's t/%d came back: %d", p, got)
		}
	}
}

// TestUnreadableRecordsDoNotStopLoading: records the coordinator cannot
// parse (written by some other writer) are skipped at load.
func TestUnreadableRecordsDoNotStopLoading(t *testing.T) {
	f := newFixture(t)
	if code := f.commit("g", "", -1, "t", 1, 11); code != 0 {
		t.Fatal(code)
	}
	p := partitionFor("g", 4)
	bad := []record{
		{key: []byte{0, 1, 0xff}, value: []byte("x")},         // truncated offset key
		{key: offsetKey("g", "t", 2), value: []byte{0, 3, 1}}, // truncated value
		{key: []byte{0, 9, 1, 2}, value: []byte("?")},         // unknown key version
		{key: []byte{7}}, // too short
	}
	if err := f.st.Append(p, encodeBatch(bad, 0)); err != nil {
		t.Fatal(err)
	}
	if code := f.commit("g", "", -1, "t", 3, 33); code != 0 {
		t.Fatal(code)
	}
	f.restart()
	if f.fetched("g", "t", 1) != 11 || f.fetched("g", "t", 3) != 33 || f.fetched("g", "t", 2) != -1 {
		t.Fatalf("after loading past bad records: %d %d %d", f.fetched("g", "t", 1), f.fetched("g", "t", 3), f.fetched("g", "t", 2))
	}
}
