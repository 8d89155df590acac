package interop

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// Group tests: real consumers in their own processes (franz-go members are
// this test binary re-executed, so a member can be killed with SIGKILL and
// never send LeaveGroup), kcat -G, and the Java console consumer and
// ConsumerPerformance, against a real sluice broker process.

const memberEnv = "SLUICE_TEST_GROUP_MEMBER" // "addr topic group balancer"

func init() {
	if spec := os.Getenv(memberEnv); spec != "" {
		os.Exit(runGroupMember(strings.Fields(spec)))
	}
}

// runGroupMember is the body of a member process: it prints
// "partition offset value" for each record and commits after each poll,
// until SIGTERM (then it leaves the group) or SIGKILL.
func runGroupMember(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "member: want addr topic group balancer")
		return 2
	}
	balancer := kgo.RangeBalancer()
	if args[3] == "cooperative-sticky" {
		balancer = kgo.CooperativeStickyBalancer()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(args[0]), kgo.ConsumeTopics(args[1]), kgo.ConsumerGroup(args[2]),
		kgo.Balancers(balancer), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(3*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signalContext()
	defer stop()
	out := bufio.NewWriter(os.Stdout)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { fmt.Fprintf(out, "%d %d %s\n", r.Partition, r.Offset, r.Value) })
		_ = out.Flush()
		if err := cl.CommitUncommittedOffsets(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "commit:", err)
		}
	}
	cl.Close() // leaves the group
	return 0
}

func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// consumed collects "value -> times seen" and who saw it from several
// member processes.
type consumed struct {
	mu     sync.Mutex
	times  map[string]int
	byProc map[int]int
}

func newConsumed() *consumed { return &consumed{times: map[string]int{}, byProc: map[int]int{}} }

func (c *consumed) add(proc int, value string) {
	c.mu.Lock()
	c.times[value]++
	c.byProc[proc]++
	c.mu.Unlock()
}

// waitFor polls until n distinct values with the prefix were seen.
func (c *consumed) waitFor(t *testing.T, prefix string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.mu.Lock()
		got := 0
		for v := range c.times {
			if strings.HasPrefix(v, prefix) {
				got++
			}
		}
		c.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("saw %d of %d records %q* within %v", got, n, prefix, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOnce fails unless every value was seen exactly once.
func (c *consumed) checkOnce(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for v, n := range c.times {
		if n != 1 {
			t.Errorf("record %q consumed %d times", v, n)
		}
	}
}

type memberProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startMember(t *testing.T, c *consumed, idx int, addr, topic, group, balancer string) *memberProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnv+"="+strings.Join([]string{addr, topic, group, balancer}, " "))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t, fmt.Sprintf("member %d: ", idx)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &memberProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 {
				c.add(idx, f[2])
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() { m.stop(syscall.SIGKILL) })
	return m
}

func (m *memberProc) stop(sig syscall.Signal) {
	_ = m.cmd.Process.Signal(sig)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

type testWriter struct {
	t      *testing.T
	prefix string
}

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// groupBrokerConfig writes a properties file for a broker with quick
// group timeouts.
func groupBrokerConfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "server.properties")
	props := "group.initial.rebalance.delay.ms=500\ngroup.min.session.timeout.ms=1000\noffsets.topic.num.partitions=5\n"
	if err := os.WriteFile(p, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitStable polls DescribeGroups until the group is Stable with n members.
func waitStable(t *testing.T, adm *kadm.Client, group string, n int, timeout time.Duration) kadm.DescribedGroup {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last kadm.DescribedGroup
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ds, err := adm.DescribeGroups(ctx, group)
		cancel()
		if err == nil {
			last = ds[group]
			if last.State == "Stable" && len(last.Members) == n {
				return last
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s not Stable with %d members within %v (last: %s, %d members)", group, n, timeout, last.State, len(last.Members))
	return last
}

func produceValues(t *testing.T, addr, topic, prefix string, partitions int32, perPartition int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("%s-%d-%d", prefix, p, i))}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitCommitted polls until every partition's committed offset is want.
func waitCommitted(t *testing.T, adm *kadm.Client, group, topic string, partitions int32, want int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		offs, err := adm.FetchOffsets(context.Background(), group)
		ok := err == nil
		for p := int32(0); ok && p < partitions; p++ {
			o, found := offs.Lookup(topic, p)
			ok = found && o.At == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offsets of %s never all reached %d: %v %v", group, want, offs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGroupMembersAgainstSluice(t *testing.T) {
	s := kafka.StartSluice(t, "--config", groupBrokerConfig(t))
	const partitions, per = 6, 50
	groups := map[string]string{}
	for _, balancer := range []string{"range", "cooperative-sticky"} {
		topic := newTopicName("group-" + balancer)
		groups[topic+"-g"] = topic
		t.Run(balancer, func(t *testing.T) { groupMembersScenario(t, s, balancer, topic, topic+"-g") })
	}
	if t.Failed() {
		return
	}
	// Committed offsets survive a kill -9 and a clean restart of the broker.
	for _, restart := range []string{"kill -9", "clean"} {
		if restart == "kill -9" {
			s.Kill()
		}
		s.Restart(t)
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr))
		if err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		for group, topic := range groups {
			waitCommitted(t, adm, group, topic, partitions, 2*per)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		listed, err := adm.ListGroups(ctx)
		cancel()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		for group := range groups {
			if _, ok := listed[group]; !ok {
				t.Errorf("after a %s restart ListGroups misses %s: %v", restart, group, listed.Groups())
			}
		}
	}
}

func groupMembersScenario(t *testing.T, s *kafka.Sluice, balancer, topic, group string) {
	const partitions, per = 6, 50
	createTopic(t, s.Addr, topic, partitions)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	c := newConsumed()
	members := make([]*memberProc, 3)
	for i := range members {
		members[i] = startMember(t, c, i, s.Addr, topic, group, balancer)
	}
	d := waitStable(t, adm, group, 3, 60*time.Second)
	assigned := map[int32]string{}
	for _, m := range d.Members {
		ca, ok := m.Assigned.AsConsumer()
		if !ok {
			t.Fatalf("member %s has no consumer assignment", m.MemberID)
		}
		for _, tp := range ca.Topics {
			for _, p := range tp.Partitions {
				if prev, dup := assigned[p]; dup {
					t.Fatalf("partition %d assigned to %s and %s", p, prev, m.MemberID)
				}
				assigned[p] = m.MemberID
			}
		}
	}
	if len(assigned) != partitions {
		t.Fatalf("assigned %d partitions, want %d", len(assigned), partitions)
	}

	produceValues(t, s.Addr, topic, "a", partitions, per)
	c.waitFor(t, "a-", partitions*per, 60*time.Second)
	waitCommitted(t, adm, group, topic, partitions, per)
	c.checkOnce(t)

	// Kill a member: no LeaveGroup. Its session (3 s) keeps it in the group
	// until it expires; then its partitions move to the others.
	members[0].stop(syscall.SIGKILL)
	killed := time.Now()
	if ds, err := adm.DescribeGroups(context.Background(), group); err != nil || ds[group].State != "Stable" || len(ds[group].Members) != 3 {
		t.Fatalf("right after the kill: %v %+v; want the killed member still in the Stable group", err, ds[group])
	}
	waitStable(t, adm, group, 2, 60*time.Second)
	if took := time.Since(killed); took < 2*time.Second {
		t.Fatalf("the killed member was removed after %v, before its 3 s session timeout", took)
	}
	produceValues(t, s.Addr, topic, "b", partitions, per)
	c.waitFor(t, "b-", partitions*per, 60*time.Second)
	waitCommitted(t, adm, group, topic, partitions, 2*per)
	c.checkOnce(t)
	c.mu.Lock()
	if c.byProc[1] == 0 || c.byProc[2] == 0 {
		t.Errorf("records per member: %v; every member should have had partitions", c.byProc)
	}
	c.mu.Unlock()
	for _, m := range members[1:] {
		m.stop(syscall.SIGTERM)
	}
	waitState(t, adm, group, "Empty", 30*time.Second) // both left with LeaveGroup
}

func waitState(t *testing.T, adm *kadm.Client, group, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ds, err := adm.DescribeGroups(context.Background(), group)
		if err == nil && ds[group].State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not %s within %v: %v %+v", group, state, timeout, err, ds[group])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
