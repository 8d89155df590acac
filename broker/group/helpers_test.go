package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

func newManualClock() *clock.Manual { return clock.NewManual(time.Unix(1_700_000_000, 0)) }

// logStorage is Storage over real partition logs (broker/log on vfs.Mem),
// as the broker provides it; failAppend injects append errors.
type logStorage struct {
	t     testing.TB
	mgr   *plog.Manager
	n     int32
	mu    sync.Mutex
	logs  []*plog.Log
	topic map[string]int32 // other topics: name -> partitions
	cfg   plog.Config      // of the offsets topic's partitions

	failAppend bool
	appendErr  error // returned by Append when set (a cluster's replicated append failing)
}

func newLogStorage(t testing.TB, fs vfs.FS, partitions int32) *logStorage {
	t.Helper()
	mgr, err := plog.OpenManager(plog.ManagerOptions{FS: fs, Dir: "/data", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st := &logStorage{t: t, mgr: mgr, n: partitions, topic: map[string]int32{"t": 6, "u": 2}, cfg: offsetsLogConfig}
	for _, tp := range mgr.Partitions() {
		if tp.Topic == OffsetsTopic {
			st.open()
			break
		}
	}
	t.Cleanup(func() { _ = mgr.Close() })
	return st
}

func (st *logStorage) open() {
	for p := int32(0); p < st.n; p++ {
		l, err := st.mgr.Open(plog.TopicPartition{Topic: OffsetsTopic, Partition: p}, st.cfg)
		if err != nil {
			st.t.Fatal(err)
		}
		st.logs = append(st.logs, l)
	}
}

func (st *logStorage) OffsetsPartitions(create bool) (int32, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.logs) == 0 && create {
		st.open()
	}
	return int32(len(st.logs)), nil
}

func (st *logStorage) Append(p int32, batch []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.failAppend {
		return errors.New("injected append failure")
	}
	if st.appendErr != nil {
		return st.appendErr
	}
	l := st.logs[p]
	if _, err := l.Append(batch, plog.CoordinatorAppend(batch)); err != nil {
		return err
	}
	return l.SetHighWatermark(l.LogEndOffset())
}

func (st *logStorage) Read(p int32, from int64, maxBytes int) ([]byte, error) {
	l := st.logs[p]
	if from >= l.LogEndOffset() {
		return nil, nil
	}
	r, err := l.Read(max(from, l.LogStartOffset()), maxBytes, l.HighWatermark())
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Bytes()
}

func (st *logStorage) MaxBatchBytes() int { return st.cfg.MaxMessageBytes }

func (st *logStorage) PartitionExists(topic string, p int32) bool {
	n, ok := st.topic[topic]
	return ok && p >= 0 && p < n
}

// offsetsLogConfig is the offsets topic's log config in tests: compacted,
// with small segments so that compaction has closed segments to clean.
var offsetsLogConfig = func() plog.Config {
	c := plog.DefaultConfig()
	c.SegmentBytes, c.Compact, c.RetentionMs = 2048, true, -1
	return c
}()

type fixture struct {
	t     *testing.T
	fs    *vfs.Mem
	st    *logStorage
	clock *clock.Manual
	c     *Coordinator
	tune  func(*Options) // changes the options the coordinator opens with
}

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith opens the coordinator with options changed by tune.
func newFixtureWith(t *testing.T, tune func(*Options)) *fixture {
	f := &fixture{t: t, fs: vfs.NewMem(), clock: newManualClock(), tune: tune}
	f.st = newLogStorage(t, f.fs, 4)
	f.c = f.open()
	t.Cleanup(func() { checkInvariants(t, f.c) })
	return f
}

// checkInvariants recomputes from scratch what the coordinator counts
// (memory.go) and queues (schedule.go), and fails the test where its
// running counts and queues disagree: every byte held is counted, and no
// group with a deadline or an expiry is missing from its queue or queued
// later than it is due.
func checkInvariants(t testing.TB, c *Coordinator) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var total int64
	for id, g := range c.groups {
		var members, record, offsets int64
		for _, m := range g.members {
			if m.bytes != m.size() || m.recordBytes != m.recordSize() {
				t.Errorf("group %s member %s: counted %d/%d bytes, holds %d/%d", id, m.id, m.bytes, m.recordBytes, m.size(), m.recordSize())
			}
			members += m.size()
			record += m.recordSize()
		}
		for pid := range g.pending {
			members += pendingSize(pid)
		}
		for tp, o := range g.offsets {
			offsets += offsetSize(tp, o)
		}
		if g.memberBytes != members || g.recordBytes != record || g.offsetBytes != offsets {
			t.Errorf("group %s: counted members %d, record %d, offsets %d; holds %d, %d, %d", id, g.memberBytes, g.recordBytes, g.offsetBytes, members, record, offsets)
		}
		if g.mem != &c.mem {
			t.Errorf("group %s counts its bytes elsewhere", id)
		}
		total += groupOverhead + int64(len(id)) + members + offsets
		if at, ok := g.nextDeadline(now); ok && (g.timer.pos == 0 || g.timer.at.After(at)) {
			t.Errorf("group %s (%s) has a deadline at %v but is queued at %v (queued: %v)", id, g.state, at, g.timer.at, g.timer.pos != 0)
		}
		if at, ok := g.expiryAt(c.opts.OffsetsRetention); ok {
			latest := maxTime(at, c.lastExpiry.Add(c.opts.OffsetsRetentionCheck))
			if g.expiry.pos == 0 || g.expiry.at.After(latest) {
				t.Errorf("group %s expires at %v but is queued for expiry at %v (queued: %v)", id, at, g.expiry.at, g.expiry.pos != 0)
			}
		}
	}
	if c.mem.used != total {
		t.Errorf("coordinator: counted %d bytes, groups hold %d", c.mem.used, total)
	}
	for _, q := range []*deadlineQueue{&c.timers, &c.expiries} {
		for i, g := range q.groups {
			if c.groups[g.id] != g || q.slot(g).pos != i+1 {
				t.Errorf("queue holds group %s at %d (slot %d), forgotten or misplaced", g.id, i, q.slot(g).pos)
			}
		}
	}
}

func (f *fixture) open() *Coordinator {
	f.t.Helper()
	opts := Options{Storage: f.st, Clock: f.clock, OffsetsPartitions: 4, InitialRebalanceDelay: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if f.tune != nil {
		f.tune(&opts)
	}
	c, err := New(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// restart closes the logs and reopens storage and coordinator.
func (f *fixture) restart() {
	f.t.Helper()
	if err := f.st.mgr.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.st = newLogStorage(f.t, f.fs, 4)
	f.c = f.open()
}

// testSessionMs is the session timeout of the members tests create.
var testSessionMs int32 = 10000

func joinReq(group, member string, instance *string, version int16) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = version
	req.Group, req.MemberID, req.InstanceID = group, member, instance
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = testSessionMs, 30000
	req.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("meta-"+member)
	req.Protocols = append(req.Protocols, p)
	return req
}

// joinAsync starts a JoinGroup and returns a channel with its answer.
func (f *fixture) joinAsync(req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- f.c.Join(context.Background(), req, Client{ID: "cl", Host: "/127.0.0.1"}) }()
	return ch
}

// wait returns the answer, ticking the coordinator until it comes.
func wait[T any](t *testing.T, c *Coordinator, ch <-chan T) T {
	t.Helper()
	checkInvariants(t, c)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case v := <-ch:
			return v
		case <-time.After(5 * time.Millisecond):
			checkInvariants(t, c)
			c.Tick()
			checkInvariants(t, c)
		}
	}
	t.Fatal("no answer within 10 s")
	var zero T
	return zero
}

// newMember joins a dynamic member through the v4+ member-id round trip
// and returns its id (the answer of the join itself comes on the channel).
func (f *fixture) newMember(group string) (string, <-chan *kmsg.JoinGroupResponse) {
	f.t.Helper()
	resp := f.c.Join(context.Background(), joinReq(group, "", nil, 9), Client{ID: "cl"})
	if resp.ErrorCode != kerr.MemberIDRequired.Code {
		f.t.Fatalf("first join: code %d, want MEMBER_ID_REQUIRED", resp.ErrorCode)
	}
	checkInvariants(f.t, f.c)
	ch := f.joinAsync(joinReq(group, resp.MemberID, nil, 9))
	f.waitJoining(group, resp.MemberID, ch)
	checkInvariants(f.t, f.c)
	return resp.MemberID, ch
}

// waitJoining waits until the member's JoinGroup waits in the coordinator
// or was answered on ch.
func (f *fixture) waitJoining(group, member string, ch <-chan *kmsg.JoinGroupResponse) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.c.mu.Lock()
		g := f.c.groups[group]
		var joining bool
		if g != nil {
			if m := g.members[member]; m != nil && m.joinWait != nil {
				joining = true
			}
		}
		f.c.mu.Unlock()
		if joining || len(ch) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("member %s never joined", member)
}

func (f *fixture) sync(group, member string, gen int32, assign map[string]string) <-chan *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = 5
	req.Group, req.MemberID, req.Generation = group, member, gen
	for m, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, []byte(a)
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- f.c.Sync(context.Background(), req) }()
	return ch
}

func (f *fixture) heartbeat(group, member string, gen int32) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = group, member, gen
	return f.c.Heartbeat(req).ErrorCode
}

func (f *fixture) commit(group, member string, gen int32, topic string, part int32, offset int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.MemberID, req.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = part, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return f.c.CommitOffsets(req).Topics[0].Partitions[0].ErrorCode
}

func (f *fixture) fetched(group, topic string, part int32) int64 {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	return f.c.FetchOffsets(req).Groups[0].Topics[0].Partitions[0].Offset
}

func (f *fixture) state(group string) string {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	return f.c.Describe(req).Groups[0].State
}

// waitMembers waits until the group has n members.
func (f *fixture) waitMembers(group string, n int) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		f.c.mu.Lock()
		g := f.c.groups[group]
		ok := g != nil && len(g.members) == n
		f.c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	f.t.Fatalf("group %s never had %d members", group, n)
}
