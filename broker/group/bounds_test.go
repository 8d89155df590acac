package group

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bigJoin is a JoinGroup v9 whose protocol carries meta bytes of metadata.
func bigJoin(group, member string, meta int) *kmsg.JoinGroupRequest {
	req := joinReq(group, member, nil, 9)
	req.Protocols[0].Metadata = bytes.Repeat([]byte{'m'}, meta)
	return req
}

// bigMember joins a dynamic member with meta bytes of metadata. It returns
// the answer of the first join (MEMBER_ID_REQUIRED when the member was let
// in) and, then, the channel of its second join's answer.
func (f *fixture) bigMember(group string, meta int) (*kmsg.JoinGroupResponse, <-chan *kmsg.JoinGroupResponse) {
	f.t.Helper()
	first := f.c.Join(context.Background(), bigJoin(group, "", meta), Client{ID: "cl", Host: "/127.0.0.1"})
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		return first, nil
	}
	ch := f.joinAsync(bigJoin(group, first.MemberID, meta))
	f.waitJoining(group, first.MemberID, ch)
	return first, ch
}

func (f *fixture) groupBytes(id string) (members, all int64) {
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	g := f.c.groups[id]
	if g == nil {
		return 0, 0
	}
	return g.memberBytes, g.footprint()
}

func codeName(code int16) string {
	if code == 0 {
		return "none"
	}
	return kerr.ErrorForCode(code).Error()
}

// TestGroupMemoryIsBoundedAndReleased: members whose metadata would take
// their group past group.max.metadata.bytes, or the coordinator past
// group.coordinator.max.bytes, are refused with the non-retriable
// MESSAGE_TOO_LARGE, and every byte comes back when the members leave or
// expire.
func TestGroupMemoryIsBoundedAndReleased(t *testing.T) {
	const meta = 300 << 10
	f := newFixtureWith(t, func(o *Options) { o.MaxGroupMetadataBytes = 1 << 20; o.MaxCoordinatorBytes = 1_400_000 })
	var a []string
	var aJoins []<-chan *kmsg.JoinGroupResponse
	for i := 0; i < 3; i++ {
		first, ch := f.bigMember("a", meta)
		if ch == nil {
			t.Fatalf("member %d of a (%d KiB of metadata, 1 MiB per group): %s, want MEMBER_ID_REQUIRED", i, meta>>10, codeName(first.ErrorCode))
		}
		a, aJoins = append(a, first.MemberID), append(aJoins, ch)
	}
	if first, _ := f.bigMember("a", meta); first.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("fourth member of a (past group.max.metadata.bytes): %s, want MESSAGE_TOO_LARGE", codeName(first.ErrorCode))
	}
	if members, _ := f.groupBytes("a"); members > 1<<20 {
		t.Fatalf("group a holds %d bytes of members, bound 1 MiB", members)
	}
	first, bJoin := f.bigMember("b", meta)
	if bJoin == nil {
		t.Fatalf("first member of b: %s, want MEMBER_ID_REQUIRED", codeName(first.ErrorCode))
	}
	b := first.MemberID
	if first, _ := f.bigMember("b", meta); first.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("second member of b (past group.coordinator.max.bytes): %s, want MESSAGE_TOO_LARGE", codeName(first.ErrorCode))
	}
	if used := f.c.Stats().Bytes; used > 1_400_000 {
		t.Fatalf("coordinator holds %d bytes, bound 1,400,000", used)
	}

	// a's members leave during the join phase; b's member completes its
	// join, never syncs and its session expires.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 3, "a"
	for _, id := range a {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		leave.Members = append(leave.Members, m)
	}
	if resp := f.c.Leave(leave); resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 {
		t.Fatalf("leave: %+v", resp)
	}
	for _, ch := range aJoins {
		if resp := wait(t, f.c, ch); resp.ErrorCode != kerr.UnknownMemberID.Code {
			t.Fatalf("join of a member that left: %s", codeName(resp.ErrorCode))
		}
	}
	f.clock.Advance(3 * time.Second)
	if resp := wait(t, f.c, bJoin); resp.ErrorCode != 0 || resp.LeaderID != b {
		t.Fatalf("join of b: %s", codeName(resp.ErrorCode))
	}
	f.clock.Advance(time.Duration(testSessionMs) * time.Millisecond)
	f.c.Tick()
	for _, id := range []string{"a", "b"} {
		if members, all := f.groupBytes(id); members != 0 || all != groupOverhead+1 {
			t.Fatalf("empty group %s still holds %d bytes of members (%d in all)", id, members, all)
		}
	}
	if st := f.c.Stats(); st.Members != 0 || st.Bytes != 2*(groupOverhead+1) {
		t.Fatalf("after every member left: %d members, %d bytes held, want 0 and two empty groups' %d", st.Members, st.Bytes, 2*(groupOverhead+1))
	}
	// What was released can be used again.
	if first := f.c.Join(context.Background(), bigJoin("b", "", meta), Client{}); first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("a member after the others left: %s, want MEMBER_ID_REQUIRED", codeName(first.ErrorCode))
	}
	// Empty groups expire; then nothing is held.
	f.clock.Advance(7*24*time.Hour + 10*time.Minute)
	f.c.Tick()
	if st := f.c.Stats(); st.Bytes != 0 || len(st.Groups) != 0 && st.Groups[StateEmpty] != 0 {
		t.Fatalf("after expiry: %d bytes held, groups %v", st.Bytes, st.Groups)
	}
}

// TestRejoinWithNewMetadataIsRecounted: a member that rejoins with other
// metadata is counted at its new size, and one whose new metadata does not
// fit is refused and leaves the group, releasing its bytes.
func TestRejoinWithNewMetadataIsRecounted(t *testing.T) {
	f := newFixtureWith(t, func(o *Options) { o.MaxGroupMetadataBytes = 1 << 20 })
	id, ch := f.newMember("g")
	f.clock.Advance(3 * time.Second)
	resp := wait(t, f.c, ch)
	if got := wait(t, f.c, f.sync("g", id, resp.Generation, map[string]string{id: "a"})); got.ErrorCode != 0 {
		t.Fatalf("sync: %s", codeName(got.ErrorCode))
	}
	small, _ := f.groupBytes("g")
	ch = f.joinAsync(bigJoin("g", id, 500<<10))
	f.waitJoining("g", id, ch)
	checkInvariants(t, f.c)
	if members, _ := f.groupBytes("g"); members < 500<<10 {
		t.Fatalf("after a rejoin with 500 KiB of metadata the group counts %d bytes (was %d)", members, small)
	}
	if resp := wait(t, f.c, ch); resp.ErrorCode != 0 {
		t.Fatalf("rejoin: %s", codeName(resp.ErrorCode))
	}
	if resp := f.c.Join(context.Background(), bigJoin("g", id, 2<<20), Client{}); resp.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("rejoin with 2 MiB of metadata: %s, want MESSAGE_TOO_LARGE", codeName(resp.ErrorCode))
	}
	checkInvariants(t, f.c)
	if members, _ := f.groupBytes("g"); members != 0 || f.c.Stats().Members != 0 {
		t.Fatalf("the refused member is still counted: %d bytes, %d members", members, f.c.Stats().Members)
	}
}

// TestOversizedGroupRecordEndsTheJoin: a member whose metadata would make
// the group record larger than the offsets topic's max.message.bytes is
// refused at its join with MESSAGE_TOO_LARGE, and the others form a
// generation that is stored; an assignment too large to store is answered
// MESSAGE_TOO_LARGE to the leader and every follower (not the retriable
// COORDINATOR_NOT_AVAILABLE / REBALANCE_IN_PROGRESS loop), and the group
// forms its next generation when they rejoin.
func TestOversizedGroupRecordEndsTheJoin(t *testing.T) {
	f := newFixtureWith(t, func(o *Options) { o.MaxGroupMetadataBytes = 64 << 20 })
	const meta = 200 << 10 // five fit in a 1 MiB record, six do not
	var ids []string
	var joins []<-chan *kmsg.JoinGroupResponse
	for i := 0; i < 5; i++ {
		first, ch := f.bigMember("g", meta)
		if ch == nil {
			t.Fatalf("member %d: %s, want MEMBER_ID_REQUIRED", i, codeName(first.ErrorCode))
		}
		ids, joins = append(ids, first.MemberID), append(joins, ch)
	}
	if first, _ := f.bigMember("g", meta); first.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("sixth member (group record past max.message.bytes): %s, want MESSAGE_TOO_LARGE", codeName(first.ErrorCode))
	}
	f.clock.Advance(3 * time.Second)
	var leader string
	var gen int32
	for _, ch := range joins {
		resp := wait(t, f.c, ch)
		if resp.ErrorCode != 0 {
			t.Fatalf("join: %s", codeName(resp.ErrorCode))
		}
		leader, gen = resp.LeaderID, resp.Generation
	}
	assign := map[string]string{}
	for _, id := range ids {
		assign[id] = "small"
	}
	if resp := wait(t, f.c, f.sync("g", leader, gen, assign)); resp.ErrorCode != 0 {
		t.Fatalf("leader's sync of five members: %s", codeName(resp.ErrorCode))
	}
	if s := f.state("g"); s != string(StateStable) {
		t.Fatalf("group is %s, want Stable", s)
	}

	// An assignment that cannot be stored.
	l, lch := f.newMember("s")
	fo, fch := f.newMember("s")
	f.clock.Advance(3 * time.Second)
	lr, fr := wait(t, f.c, lch), wait(t, f.c, fch)
	if lr.LeaderID != l {
		l, fo = fo, l
	}
	follower := f.sync("s", fo, fr.Generation, nil)
	f.waitSyncing("s", fo, follower)
	huge := map[string]string{l: string(bytes.Repeat([]byte{'a'}, 600<<10)), fo: string(bytes.Repeat([]byte{'a'}, 600<<10))}
	if resp := wait(t, f.c, f.sync("s", l, lr.Generation, huge)); resp.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("leader's sync of a 1.2 MB assignment: %s, want MESSAGE_TOO_LARGE", codeName(resp.ErrorCode))
	}
	if resp := wait(t, f.c, follower); resp.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("follower's sync: %s, want MESSAGE_TOO_LARGE", codeName(resp.ErrorCode))
	}
	// Both rejoin; the next generation forms and is stored.
	lch, fch = f.joinAsync(joinReq("s", l, nil, 9)), f.joinAsync(joinReq("s", fo, nil, 9))
	lr, fr = wait(t, f.c, lch), wait(t, f.c, fch)
	if lr.ErrorCode != 0 || fr.ErrorCode != 0 || lr.Generation != fr.Generation {
		t.Fatalf("rejoin: %s, %s", codeName(lr.ErrorCode), codeName(fr.ErrorCode))
	}
	leader = lr.LeaderID
	if resp := wait(t, f.c, f.sync("s", leader, lr.Generation, map[string]string{l: "x", fo: "y"})); resp.ErrorCode != 0 {
		t.Fatalf("sync after the rejoin: %s", codeName(resp.ErrorCode))
	}
	if s := f.state("s"); s != string(StateStable) {
		t.Fatalf("group is %s after the rejoin, want Stable", s)
	}
}

// waitSyncing waits until the member's SyncGroup waits in the coordinator.
func (f *fixture) waitSyncing(group, member string, ch <-chan *kmsg.SyncGroupResponse) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.c.mu.Lock()
		g := f.c.groups[group]
		syncing := g != nil && g.members[member] != nil && g.members[member].syncWait != nil
		f.c.mu.Unlock()
		if syncing || len(ch) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("member %s never synced", member)
}

// longTopic is a topic whose offsets' tombstones are large.
var longTopic = string(bytes.Repeat([]byte{'T'}, 200))

// TestOneRequestIsBounded is the class of cases 9 and 10: every place where
// one coordinator request could make the broker hold or send without bound
// answers a non-retriable error at the bound, or sends an answer bounded by
// what the coordinator holds (itself bounded) and the request's own size.
func TestOneRequestIsBounded(t *testing.T) {
	const perGroup, total = 1 << 20, 4 << 20
	tune := func(o *Options) { o.MaxGroupMetadataBytes, o.MaxCoordinatorBytes, o.MaxGroupSize = perGroup, total, 50 }
	// filler adds a group of n members with meta bytes of metadata each.
	filler := func(f *fixture, group string, n, meta int) {
		for i := 0; i < n; i++ {
			if first, ch := f.bigMember(group, meta); ch == nil {
				t.Fatalf("filler member %d of %s: %s", i, group, codeName(first.ErrorCode))
			}
		}
	}
	commit := func(group string, topic string, parts int, meta int) *kmsg.OffsetCommitRequest {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		m := string(bytes.Repeat([]byte{'x'}, meta))
		for p := 0; p < parts; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = int32(p), 1, &m
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	}
	commitCode := func(f *fixture, req *kmsg.OffsetCommitRequest) int16 {
		resp := f.c.CommitOffsets(req)
		code := resp.Topics[0].Partitions[0].ErrorCode
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != code {
				t.Fatalf("partitions of one commit answered differently: %d and %d", code, p.ErrorCode)
			}
		}
		return code
	}
	// answered: the code of the request, and the size of its answer and of
	// the request (0 when the answer is an error code only).
	type answered struct {
		code            int16
		answer, request int
	}
	for _, tc := range []struct {
		name string
		// topics overrides the partitions of the other topics.
		topics map[string]int32
		setup  func(f *fixture)
		run    func(f *fixture) answered
		want   int16
	}{
		{name: "JoinGroup metadata past group.max.metadata.bytes",
			run: func(f *fixture) answered {
				first, _ := f.bigMember("g", perGroup+1)
				return answered{code: first.ErrorCode}
			}, want: kerr.MessageTooLarge.Code},
		{name: "JoinGroup metadata past group.coordinator.max.bytes",
			setup: func(f *fixture) {
				for i := 0; i < 4; i++ {
					filler(f, fmt.Sprintf("fill-%d", i), 3, 300<<10)
				}
			},
			run: func(f *fixture) answered {
				first, _ := f.bigMember("g", 500<<10)
				return answered{code: first.ErrorCode}
			}, want: kerr.MessageTooLarge.Code},
		{name: "JoinGroup metadata past the group record's max.message.bytes",
			setup: func(f *fixture) { f.st.cfg.MaxMessageBytes = 64 << 10; filler(f, "g", 3, 20<<10) },
			run: func(f *fixture) answered {
				first, _ := f.bigMember("g", 20<<10)
				return answered{code: first.ErrorCode}
			}, want: kerr.MessageTooLarge.Code},
		{name: "JoinGroup past group.max.size",
			setup: func(f *fixture) { filler(f, "g", 50, 1) },
			run: func(f *fixture) answered {
				first, _ := f.bigMember("g", 1)
				return answered{code: first.ErrorCode}
			}, want: kerr.GroupMaxSizeReached.Code},
		{name: "JoinGroup with more than 64 protocols",
			run: func(f *fixture) answered {
				req := joinReq("g", "", nil, 9)
				for i := 0; i < 100; i++ {
					p := kmsg.NewJoinGroupRequestProtocol()
					p.Name = fmt.Sprintf("p%d", i)
					req.Protocols = append(req.Protocols, p)
				}
				return answered{code: f.c.Join(context.Background(), req, Client{}).ErrorCode}
			}, want: kerr.InconsistentGroupProtocol.Code},
		{name: "JoinGroup with a protocol name past 255 bytes",
			run: func(f *fixture) answered {
				req := joinReq("g", "", nil, 9)
				req.Protocols[0].Name = string(bytes.Repeat([]byte{'p'}, 32000))
				return answered{code: f.c.Join(context.Background(), req, Client{}).ErrorCode}
			}, want: kerr.InconsistentGroupProtocol.Code},
		{name: "SyncGroup assignment past group.max.metadata.bytes",
			run: func(f *fixture) answered {
				id, ch := f.newMember("g")
				f.clock.Advance(3 * time.Second)
				resp := wait(t, f.c, ch)
				sync := wait(t, f.c, f.sync("g", id, resp.Generation, map[string]string{id: string(bytes.Repeat([]byte{'a'}, perGroup))}))
				return answered{code: sync.ErrorCode}
			}, want: kerr.MessageTooLarge.Code},
		{name: "SyncGroup assignment past the group record's max.message.bytes",
			setup: func(f *fixture) { f.st.cfg.MaxMessageBytes = 64 << 10 },
			run: func(f *fixture) answered {
				id, ch := f.newMember("g")
				f.clock.Advance(3 * time.Second)
				resp := wait(t, f.c, ch)
				sync := wait(t, f.c, f.sync("g", id, resp.Generation, map[string]string{id: string(bytes.Repeat([]byte{'a'}, 100<<10))}))
				return answered{code: sync.ErrorCode}
			}, want: kerr.MessageTooLarge.Code},
		{name: "OffsetCommit metadata past offset.metadata.max.bytes",
			run: func(f *fixture) answered {
				return answered{code: commitCode(f, commit("g", "t", 1, 4097))}
			}, want: kerr.OffsetMetadataTooLarge.Code},
		{name: "OffsetCommit records past one batch of the offsets topic",
			topics: map[string]int32{"t": 300},
			run: func(f *fixture) answered {
				return answered{code: commitCode(f, commit("g", "t", 300, 4000))}
			}, want: kerr.InvalidCommitOffsetSize.Code},
		{name: "OffsetCommit past group.coordinator.max.bytes",
			topics: map[string]int32{"t": 200},
			setup: func(f *fixture) {
				for i := 0; i < 4; i++ {
					filler(f, fmt.Sprintf("fill-%d", i), 3, 330<<10)
				}
			},
			run: func(f *fixture) answered {
				return answered{code: commitCode(f, commit("g", "t", 200, 4000))}
			}, want: kerr.InvalidCommitOffsetSize.Code},
		{name: "DeleteGroups of a group with more offsets than one batch holds",
			topics: map[string]int32{longTopic: 8000},
			setup: func(f *fixture) {
				for p := 0; p < 8000; p += 1000 {
					req := commit("g", longTopic, 1000, 0)
					for i := range req.Topics[0].Partitions {
						req.Topics[0].Partitions[i].Partition = int32(p + i)
					}
					if code := commitCode(f, req); code != 0 {
						t.Fatalf("commit: %s", codeName(code))
					}
				}
			},
			run: func(f *fixture) answered {
				req := kmsg.NewPtrDeleteGroupsRequest()
				req.Groups = []string{"g"}
				return answered{code: f.c.Delete(req).Groups[0].ErrorCode}
			}, want: 0},
		{name: "ListGroups answer",
			setup: func(f *fixture) {
				for i := 0; i < 200; i++ {
					if code := commitCode(f, commit(fmt.Sprintf("group-%s-%d", bytes.Repeat([]byte{'n'}, 200), i), "t", 1, 0)); code != 0 {
						t.Fatalf("commit: %s", codeName(code))
					}
				}
			},
			run: func(f *fixture) answered {
				req := kmsg.NewPtrListGroupsRequest()
				req.Version = 4
				return answered{answer: len(f.c.List(req).AppendTo(nil)), request: len(req.AppendTo(nil))}
			}},
		{name: "DescribeGroups of many groups",
			setup: func(f *fixture) {
				for i := 0; i < 3; i++ {
					filler(f, fmt.Sprintf("fill-%d", i), 3, 300<<10)
				}
				f.clock.Advance(3 * time.Second) // CompletingRebalance: members are described with their metadata
				f.c.Tick()
			},
			run: func(f *fixture) answered {
				req := kmsg.NewPtrDescribeGroupsRequest()
				req.Version = 5
				for i := 0; i < 3; i++ {
					for j := 0; j < 100; j++ {
						req.Groups = append(req.Groups, fmt.Sprintf("fill-%d", i)) // repeated: answered once
					}
				}
				for i := 0; i < 10000; i++ {
					req.Groups = append(req.Groups, fmt.Sprintf("unknown-%d", i))
				}
				return answered{answer: len(f.c.Describe(req).AppendTo(nil)), request: len(req.AppendTo(nil))}
			}},
		{name: "OffsetFetch of many groups, all topics",
			topics: map[string]int32{"t": 100},
			setup: func(f *fixture) {
				for i := 0; i < 20; i++ {
					if code := commitCode(f, commit(fmt.Sprintf("g-%d", i), "t", 100, 1000)); code != 0 {
						t.Fatalf("commit: %s", codeName(code))
					}
				}
			},
			run: func(f *fixture) answered {
				req := kmsg.NewPtrOffsetFetchRequest()
				req.Version = 8
				for r := 0; r < 50; r++ {
					for i := 0; i < 20; i++ {
						rg := kmsg.NewOffsetFetchRequestGroup()
						rg.Group = fmt.Sprintf("g-%d", i) // repeated: answered once
						req.Groups = append(req.Groups, rg)
					}
				}
				return answered{answer: len(f.c.FetchOffsets(req).AppendTo(nil)), request: len(req.AppendTo(nil))}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, tune)
			for topic, n := range tc.topics {
				f.st.topic[topic] = n
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			before := f.c.Stats().Bytes
			got := tc.run(f)
			if got.code != tc.want {
				t.Fatalf("answered %s, want %s", codeName(got.code), codeName(tc.want))
			}
			checkInvariants(t, f.c)
			st := f.c.Stats()
			if st.Bytes > total {
				t.Fatalf("coordinator holds %d bytes, bound %d", st.Bytes, total)
			}
			f.c.mu.Lock()
			for id, g := range f.c.groups {
				if g.memberBytes > perGroup {
					t.Errorf("group %s holds %d bytes of members, bound %d", id, g.memberBytes, perGroup)
				}
			}
			f.c.mu.Unlock()
			// An answer is bounded by what is held and by the request (one
			// entry per name it names, each no larger than 64 bytes plus
			// the name).
			if limit := int(max(before, st.Bytes)) + 32*got.request + 4096; got.answer > limit {
				t.Fatalf("answer of %d bytes for a %d-byte request, over %d", got.answer, got.request, limit)
			}
		})
	}
}
