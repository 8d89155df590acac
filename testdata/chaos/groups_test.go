package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// groupMember is a consumer-group member process: workload.ConsumeGroup
// of CHAOS_TOPIC as a member of CHAOS_GROUP on CHAOS_BOOTSTRAP, committing
// after every poll, its operations written to stdout as history JSON lines
// (flushed after each poll and its commit) for memberLines to take into the
// run's history. Its ticks come from the run's counter file CHAOS_TICKS, so
// each operation keeps the place in time it had here, however late its line
// reaches the test (a pause can hold it for seconds). It runs until it is
// killed.
func groupMember() int {
	ticks, err := history.OpenTicks(os.Getenv("CHAOS_TICKS"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "member: the run's tick counter (CHAOS_TICKS):", err)
		return 1
	}
	rec := history.NewRecorderTicks(os.Stdout, ticks)
	fmt.Println("member ready")
	err = workload.ConsumeGroup(context.Background(), rec, workload.GroupConfig{
		Bootstrap: []string{os.Getenv("CHAOS_BOOTSTRAP")}, Topic: os.Getenv("CHAOS_TOPIC"), Group: os.Getenv("CHAOS_GROUP"),
		NoRetention: true,
		Until:       func(int) bool { return rec.Flush() != nil },
		// a poll is one line of the node's log: kept well under its 1 MiB bound
		// franz-go's group events (joins, errors) go to the node's log
		Options: []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)),
			kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
			kgo.RebalanceTimeout(5 * time.Second), kgo.FetchMaxBytes(64 << 10), kgo.FetchMaxPartitionBytes(64 << 10)},
	})
	if err == nil {
		err = rec.Flush()
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// memberLines takes a member node's operations (history JSON lines) into
// the run's history with their ticks (history.Recorder.Take); each start of
// the node is a new history process.
type memberLines struct {
	rec  *history.Recorder
	base int // process ids are base*100 + start

	mu  sync.Mutex // guards err
	err error      // the first op refused
}

func (m *memberLines) line(start int, line string) {
	var op history.Op
	if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &op) != nil {
		return // the member's other output
	}
	if _, err := m.rec.Take(m.base*100+start, op); err != nil {
		m.mu.Lock()
		if m.err == nil {
			m.err = fmt.Errorf("member %d start %d: %w", m.base, start, err)
		}
		m.mu.Unlock()
	}
}

// failed is the first op the member sent that could not be taken.
func (m *memberLines) failed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// TestGroupMembersKilledAndPaused: three member processes of one consumer
// group consume a topic being written, while members are killed (kill -9)
// and paused (SIGSTOP past the session timeout), each fault a rebalance.
// The checker: no record a committed offset covers is skipped by the next
// owner (skip, from the assign at the committed offset), committed offsets
// never go backwards (commit-backwards, also from the test's own reads of
// the group's offsets), polls within an ownership move forward.
func TestGroupMembersKilledAndPaused(t *testing.T) {
	groupScenario(t, "groups", "commit after every poll", func(r *harness.Run, members []*harness.Node) ([]harness.Nemesis, []harness.Step) {
		steps := harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "kill", "pause")
		steps = stretchHolds(steps, 4*time.Second, "pause") // a pause outlasts the 3 s session: a rebalance
		return []harness.Nemesis{&harness.Kill{Nodes: members}, &harness.Pause{Nodes: members}}, steps
	})
}

// TestGroupMembersLossyLink: the same group with a member's link losing
// 30% of its packets either way (an nft drop scoped to the member's own
// address; the kernel here has no netem, and TCP's retransmissions make
// the lossy link a slow one too), or all of them (100%: the member is cut
// off past its session and the group rebalances without it), one member
// at a time. The same checks: no skip past a committed offset, commits
// never go back.
func TestGroupMembersLossyLink(t *testing.T) {
	groupScenario(t, "groups-lossy-link", "links losing 30% or 100% of packets, one member at a time", func(r *harness.Run, members []*harness.Node) ([]harness.Nemesis, []harness.Step) {
		steps := harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "lossy", "lossy-all")
		steps = stretchHolds(steps, 4*time.Second, "lossy", "lossy-all") // each loss outlasts the 3 s session
		any := func() (string, error) { return members[r.Rand.Intn(len(members))].Name, nil }
		return []harness.Nemesis{
			&harness.Lose{Net: r.Net, Nodes: members, Percent: 30},
			&harness.Aimed{As: "lossy-all", Nemesis: &harness.Lose{Net: r.Net, Nodes: members, Percent: 100}, Target: any},
		}, steps
	})
}

// groupScenario runs three member processes of one group over a topic
// being written, under the nemeses and schedule faults returns, and checks
// the history.
func groupScenario(t *testing.T, scenario, note string, faults func(r *harness.Run, members []*harness.Node) ([]harness.Nemesis, []harness.Step)) {
	r := harness.NewRun(t, scenario, 12*time.Second)
	b := startBroker(t, r, "broker", "num.partitions=3\ngroup.min.session.timeout.ms=1000\ngroup.initial.rebalance.delay.ms=0\n")
	sluice.CreateTopic(t, b.HostPort, "chaos", 3)
	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var members []*harness.Node
	var lines []*memberLines
	for i := 1; i <= 3; i++ {
		n := r.Reserve(fmt.Sprintf("m%d", i))
		ml := &memberLines{rec: rec, base: i}
		lines = append(lines, ml)
		n.Define(harness.Spec{Args: []string{exe}, Env: []string{"CHAOS_MEMBER=1", "CHAOS_GROUP=chaos-g", "CHAOS_TOPIC=chaos",
			"CHAOS_BOOTSTRAP=" + b.HostPort, "CHAOS_TICKS=" + ticksPath(r)}, OnLine: ml.line, Ready: func(line string) bool { return line == "member ready" }})
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		members = append(members, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+time.Minute)
	defer cancel()
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 1, 2, nil, 5*time.Millisecond)
	watch := watchCommitted(ctx, t, rec, b.HostPort, "chaos-g")
	nemeses, steps := faults(r, members)
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events, Steps: steps, Nemeses: nemeses}
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	load.stop()
	watch.stop()
	for _, n := range members {
		n.Kill()
	}
	for _, ml := range lines {
		if err := ml.failed(); err != nil {
			t.Error(err)
		}
	}
	finalRead(t, rec, b.HostPort, "chaos")
	st.close()
	closeHistory()
	h := rec.History()
	res := verdict(t, r, sched, h, st, harness.Report{History: historyPath(r), Notes: []string{"3 member processes, session timeout 3 s, " + note}})
	if res.Stats.Commits == 0 || res.Stats.ReadRecords == 0 {
		t.Errorf("the members neither read nor committed: %+v", res.Stats)
	}
}

// stretchHolds makes every fault of the named nemeses hold at least min,
// moving the later steps on by what it added.
func stretchHolds(steps []harness.Step, min time.Duration, nemeses ...string) []harness.Step {
	var out []harness.Step
	shift := time.Duration(0)
	for _, s := range steps {
		s.At += shift
		if slices.Contains(nemeses, s.Nemesis) && s.Hold < min {
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
