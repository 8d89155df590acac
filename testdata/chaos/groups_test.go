package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// groupMember is a consumer-group member process: it consumes
// CHAOS_TOPIC as a member of CHAOS_GROUP on CHAOS_BOOTSTRAP, commits after
// every poll, and reports on stdout, one line each:
//
//	assign P O     partition P assigned, resuming at committed offset O (-1: none)
//	rec P O VALUE  a record polled
//	commit P O     offset O of P committed (acknowledged by the coordinator)
func groupMember() int {
	group, topic := os.Getenv("CHAOS_GROUP"), os.Getenv("CHAOS_TOPIC")
	var adm *kadm.Client
	var mu sync.Mutex // serialises the report lines
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
		mu.Unlock()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(os.Getenv("CHAOS_BOOTSTRAP")), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.SessionTimeout(3*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond), kgo.RebalanceTimeout(5*time.Second), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
		kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			committed, err := adm.FetchOffsets(fctx, group)
			cancel()
			for _, p := range m[topic] {
				off := int64(-1)
				if o, ok := committed.Lookup(topic, p); ok && err == nil && o.Err == nil && o.At >= 0 {
					off = o.At
				} else if err == nil {
					off = 0 // no commit: the reset offset, the log start (nothing is deleted here)
				}
				say("assign %d %d", p, off)
			}
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(os.Getenv("CHAOS_BOOTSTRAP"))) // apart from the member's own client
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	adm = kadm.NewClient(admCl)
	say("member ready")
	ctx := context.Background()
	for {
		fs := cl.PollRecords(ctx, 100)
		last := map[int32]int64{}
		fs.EachRecord(func(r *kgo.Record) {
			say("rec %d %d %s", r.Partition, r.Offset, recordValueOf(r.Value))
			last[r.Partition] = r.Offset
		})
		if len(last) > 0 {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := cl.CommitUncommittedOffsets(cctx)
			cancel()
			if err == nil {
				for p, o := range last {
					say("commit %d %d", p, o+1)
				}
			}
		}
		cl.AllowRebalance()
	}
}

// memberLines turns a member node's report lines into history operations;
// each start of the node is a new history process.
type memberLines struct {
	rec   *history.Recorder
	topic string
	group string
	base  int // process ids are base*100 + start
}

func (m *memberLines) line(start int, line string) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return
	}
	p, err1 := strconv.ParseInt(f[1], 10, 32)
	o, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	proc := m.base*100 + start
	off := []history.Offset{{Topic: m.topic, Partition: int32(p), Offset: o}}
	switch f[0] {
	case "assign":
		m.rec.Invoke(proc, history.Assign).Complete(history.Op{Outcome: history.OK, Offsets: off})
	case "rec":
		if len(f) < 4 {
			return
		}
		m.rec.Invoke(proc, history.Poll).Complete(history.Op{Outcome: history.OK,
			Records: []history.Record{{Topic: m.topic, Partition: int32(p), Offset: o, Value: f[3]}}})
	case "commit":
		m.rec.Invoke(proc, history.Commit).Complete(history.Op{Outcome: history.OK, Group: m.group, Offsets: off})
	}
}

// TestGroupMembersKilledAndPaused: three member processes of one consumer
// group consume a topic being written, while members are killed (kill -9)
// and paused (SIGSTOP past the session timeout), each fault a rebalance.
// The checker: no record a committed offset covers is skipped by the next
// owner (skip, from the assign at the committed offset), committed offsets
// never go backwards (commit-backwards, also from the test's own reads of
// the group's offsets), polls within an ownership move forward.
func TestGroupMembersKilledAndPaused(t *testing.T) {
	r := harness.NewRun(t, "groups", 12*time.Second)
	b := startBroker(t, r, "broker", "num.partitions=3\ngroup.min.session.timeout.ms=1000\ngroup.initial.rebalance.delay.ms=0\n")
	sluice.CreateTopic(t, b.HostPort, "chaos", 3)
	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var members []*harness.Node
	for i := 1; i <= 3; i++ {
		n := r.Reserve(fmt.Sprintf("m%d", i))
		ml := &memberLines{rec: rec, topic: "chaos", group: "chaos-g", base: i}
		n.Define(harness.Spec{Args: []string{exe}, Env: []string{"CHAOS_MEMBER=1", "CHAOS_GROUP=chaos-g", "CHAOS_TOPIC=chaos",
			"CHAOS_BOOTSTRAP=" + b.HostPort}, OnLine: ml.line, Ready: func(line string) bool { return line == "member ready" }})
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		members = append(members, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+time.Minute)
	defer cancel()
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", "all", 1, 2, nil, 5*time.Millisecond)
	watch := watchCommitted(ctx, t, rec, b.HostPort, "chaos-g")
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
		Steps:   harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "kill", "pause"),
		Nemeses: []harness.Nemesis{&harness.Kill{Nodes: members}, &harness.Pause{Nodes: members}}}
	sched.Steps = stretchPauses(sched.Steps, 4*time.Second) // a pause outlasts the 3 s session: a rebalance
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	load.stop()
	watch.stop()
	for _, n := range members {
		n.Kill()
	}
	finalRead(t, rec, b.HostPort, "chaos", 3)
	st.close()
	closeHistory()
	h := rec.History()
	res := verdict(r, sched, h, st, harness.Report{History: historyPath(r), Notes: []string{"3 member processes, session timeout 3 s, commit after every poll"}})
	if res.Stats.Commits == 0 || res.Stats.ReadRecords == 0 {
		t.Errorf("the members neither read nor committed: %+v", res.Stats)
	}
}

// stretchPauses makes every pause hold at least min.
func stretchPauses(steps []harness.Step, min time.Duration) []harness.Step {
	var out []harness.Step
	shift := time.Duration(0)
	for _, s := range steps {
		s.At += shift
		if s.Nemesis == "pause" && s.Hold < min {
			shift += min - s.Hold
			s.Hold = min
		}
		out = append(out, s)
	}
	return out
}

// watchCommitted reads the group's committed offsets every 200 ms as
// fetch-committed operations.
func watchCommitted(ctx context.Context, t *testing.T, rec *history.Recorder, addr, group string) *running {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &running{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cl.Close()
		adm := kadm.NewClient(cl)
		for ctx.Err() == nil {
			op := rec.Invoke(9, history.FetchCommitted)
			fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
			res, err := adm.FetchOffsets(fctx, group)
			fcancel()
			if err != nil {
				op.Complete(history.Op{Outcome: history.Unknown, Group: group, Error: err.Error()})
			} else {
				var offs []history.Offset
				res.Each(func(o kadm.OffsetResponse) {
					if o.Err == nil && o.At >= 0 {
						offs = append(offs, history.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.At})
					}
				})
				op.Complete(history.Op{Outcome: history.OK, Group: group, Offsets: offs})
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // the watch's rate
			}
		}
	}()
	return l
}
