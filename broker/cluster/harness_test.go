package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/zksession"
	zkharness "github.com/sluicehq/sluice/testdata/harness/zk"
)

// proxy forwards TCP to ZooKeeper and can cut a client off: cut closes
// its connections and refuses new ones until heal, so the client's session
// expires on the server while the client process goes on (a pause, or a
// network partition from ZooKeeper).
type proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cutOff bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.accept()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cutOff {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOff = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.cutOff = false
	p.mu.Unlock()
}

// change is one recorded state write.
type change struct{ old, new PartitionState }

// testCluster runs Nodes in this process on one ZooKeeper, each through its
// own proxy, and records every state write and every state delivered.
type testCluster struct {
	t       *testing.T
	zk      *zkharness.Server
	chroot  string
	opts    func(id int32) Options
	watcher *zksession.Session

	mu        sync.Mutex
	changes   []change
	delivered map[int32][]PartitionState // by broker, in delivery order
	nodes     map[int32]*testNode
}

type testNode struct {
	n     *Node
	proxy *proxy
}

var testLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

const testSession = 3 * time.Second // 1 s expired under a loaded machine: JVM pauses past 2/3 of it close the connection

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	z := zkharness.Start(t)
	c := &testCluster{t: t, zk: z, chroot: "/sluice", delivered: map[int32][]PartitionState{}, nodes: map[int32]*testNode{}}
	c.opts = func(id int32) Options { return Options{} }
	w, err := zksession.Dial(z.Connect(c.chroot), 10*time.Second, testLog)
	if err != nil {
		t.Fatal(err)
	}
	c.watcher = w
	t.Cleanup(func() {
		c.mu.Lock()
		nodes := c.nodes
		c.nodes = map[int32]*testNode{}
		c.mu.Unlock()
		for _, tn := range nodes {
			tn.n.Close()
		}
		w.Close()
	})
	return c
}

// start starts broker id (through a new proxy) and waits for it to register.
func (c *testCluster) start(id int32) *Node {
	c.t.Helper()
	n, err := c.tryStart(id, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

// startThreeControlledBy1 starts broker 1, waits until it is the
// controller, starts brokers 2 and 3 and waits for the cluster to settle;
// it returns broker 1.
func (c *testCluster) startThreeControlledBy1() *Node {
	c.t.Helper()
	n1 := c.start(1)
	waitFor(c.t, "broker 1 to control", 10*time.Second, func() (bool, string) { _, self := n1.Controller(); return self, "" })
	c.start(2)
	c.start(3)
	c.waitSettled(false)
	return n1
}

func (c *testCluster) tryStart(id int32, registerWait time.Duration) (*Node, error) {
	p := newProxy(c.t, c.zk.Addr)
	o := c.opts(id)
	o.Connect = p.addr() + c.chroot
	o.SessionTimeout = testSession
	o.RegisterWait = registerWait
	o.Broker = BrokerInfo{ID: id, Host: "127.0.0.1", Port: 9000 + id, Endpoints: []Endpoint{{Name: "REPLICATION", Host: "127.0.0.1", Port: 19000 + id}}}
	o.Logger = testLog
	o.OnStateChange = func(old, new PartitionState) {
		c.mu.Lock()
		c.changes = append(c.changes, change{old, new})
		c.mu.Unlock()
	}
	o.OnStates = func(states []PartitionState) {
		c.mu.Lock()
		c.delivered[id] = append(c.delivered[id], states...)
		c.mu.Unlock()
	}
	n, err := Start(context.Background(), o)
	if err != nil {
		return nil, err
	}
	c.t.Cleanup(n.Close) // before its proxy goes
	c.mu.Lock()
	c.nodes[id] = &testNode{n: n, proxy: p}
	c.mu.Unlock()
	return n, nil
}

func (c *testCluster) node(id int32) *testNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

// stop closes broker id (its session ends: a broker death seen at once).
func (c *testCluster) stop(id int32) {
	c.mu.Lock()
	tn := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	tn.n.Close()
}

func (c *testCluster) liveIDs() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []int32
	for id := range c.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// waitFor polls cond (reading ZooKeeper) until it holds, failing after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %s", limit, what, last)
		}
		time.Sleep(20 * time.Millisecond) // polling ZooKeeper
	}
}

// states reads every partition's state through the observer session.
func (c *testCluster) states() ([]PartitionState, error) {
	names, err := readTopicNames(c.watcher)
	if err != nil {
		return nil, err
	}
	var out []PartitionState
	for _, topic := range names {
		a, ok, err := readAssignment(c.watcher, topic)
		if err != nil || !ok {
			return nil, fmt.Errorf("topic %s: %v", topic, err)
		}
		for p, r := range a.Replicas {
			st, ok, err := readState(c.watcher, a, int32(p))
			if err != nil {
				return nil, err
			}
			if !ok {
				st = PartitionState{Topic: topic, Partition: int32(p), Leader: -1, Replicas: r, Version: -1}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// settled: a controller runs among the live brokers, the registered
// brokers are exactly the live ones, and every partition with a live ISR
// member has a live leader and no dead broker in its ISR (the controller
// has reacted to everything).
func (c *testCluster) settled(unclean bool) (bool, string) {
	live := c.liveIDs()
	reg, err := readIDs(c.watcher, brokerIDsPath)
	if err != nil {
		return false, err.Error()
	}
	if !slices.Equal(reg, live) {
		return false, fmt.Sprintf("registered %v, live %v", reg, live)
	}
	ctl, _, err := readController(c.watcher)
	if err != nil || !slices.Contains(live, ctl) {
		return false, fmt.Sprintf("controller %d (%v), live %v", ctl, err, live)
	}
	states, err := c.states()
	if err != nil {
		return false, err.Error()
	}
	for _, st := range states {
		liveISR := slices.ContainsFunc(st.ISR, func(b int32) bool { return slices.Contains(live, b) })
		liveReplica := slices.ContainsFunc(st.Replicas, func(b int32) bool { return slices.Contains(live, b) })
		switch {
		case st.Version < 0 && liveReplica:
			return false, fmt.Sprintf("%s-%d has no state", st.Topic, st.Partition)
		case (liveISR || (unclean && liveReplica)) && !slices.Contains(live, st.Leader):
			return false, fmt.Sprintf("%s-%d led by %d, live %v, isr %v", st.Topic, st.Partition, st.Leader, live, st.ISR)
		case st.Leader >= 0 && slices.ContainsFunc(st.ISR, func(b int32) bool { return !slices.Contains(live, b) }):
			return false, fmt.Sprintf("%s-%d isr %v holds a dead broker (live %v)", st.Topic, st.Partition, st.ISR, live)
		}
	}
	return true, ""
}

func (c *testCluster) waitSettled(unclean bool) {
	c.t.Helper()
	waitFor(c.t, "the controller to settle", 30*time.Second, func() (bool, string) { return c.settled(unclean) })
}

// checkHistory checks the recorded state writes: per partition they form
// one chain of conditional writes (each on the version the previous one
// made); leader epochs never go down; one leader per leader epoch; the
// leader is in the ISR; with unclean election off a new leader comes from
// the ISR before it. It also checks that brokers were never told two
// leaders for one epoch.
func (c *testCluster) checkHistory(unclean bool) {
	c.t.Helper()
	c.mu.Lock()
	changes := slices.Clone(c.changes)
	delivered := map[int32][]PartitionState{}
	for id, d := range c.delivered {
		delivered[id] = slices.Clone(d)
	}
	c.mu.Unlock()
	byPartition := map[partitionKey][]change{}
	for _, ch := range changes {
		k := partitionKey{ch.new.Topic, ch.new.Partition}
		byPartition[k] = append(byPartition[k], ch)
	}
	leaderOf := map[partitionKey]map[int32]int32{}
	for k, chain := range byPartition {
		slices.SortFunc(chain, func(a, b change) int { return int(a.new.Version - b.new.Version) })
		leaderOf[k] = map[int32]int32{}
		for i, ch := range chain {
			if i == 0 && ch.old.Version != -1 {
				c.t.Fatalf("%v: first write is on version %d, not a create", k, ch.old.Version)
			}
			if i > 0 {
				prev := chain[i-1].new
				if ch.old.Version != prev.Version || ch.new.Version != prev.Version+1 || !sameDecision(ch.old, prev) {
					c.t.Fatalf("%v: write %d (%+v -> %+v) does not follow the previous write (%+v): a write was not conditional", k, i, ch.old, ch.new, prev)
				}
			}
			n := ch.new
			if n.LeaderEpoch < ch.old.LeaderEpoch {
				c.t.Fatalf("%v: leader epoch went from %d down to %d", k, ch.old.LeaderEpoch, n.LeaderEpoch)
			}
			if n.Leader >= 0 && !slices.Contains(n.ISR, n.Leader) {
				c.t.Fatalf("%v: leader %d not in ISR %v (epoch %d)", k, n.Leader, n.ISR, n.LeaderEpoch)
			}
			if prev, ok := leaderOf[k][n.LeaderEpoch]; ok && prev != n.Leader {
				c.t.Fatalf("%v: two leaders (%d, %d) for leader epoch %d", k, prev, n.Leader, n.LeaderEpoch)
			}
			leaderOf[k][n.LeaderEpoch] = n.Leader
			if !unclean && i > 0 && n.Leader >= 0 && n.Leader != ch.old.Leader && !slices.Contains(ch.old.ISR, n.Leader) {
				c.t.Fatalf("%v: %d elected from outside the ISR %v with unclean election off", k, n.Leader, ch.old.ISR)
			}
		}
	}
	for id, states := range delivered {
		for _, st := range states {
			k := partitionKey{st.Topic, st.Partition}
			if l, ok := leaderOf[k][st.LeaderEpoch]; ok && l != st.Leader {
				c.t.Fatalf("broker %d was told leader %d for %v epoch %d; the history says %d", id, st.Leader, k, st.LeaderEpoch, l)
			}
		}
	}
	c.t.Logf("history: %d state writes over %d partitions", len(changes), len(byPartition))
}

func isStale(err error) bool { return errors.Is(err, ErrStaleState) }

func seeded(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	if s := os.Getenv("SLUICE_SEED"); s != "" {
		fmt.Sscan(strings.TrimSpace(s), &seed)
	}
	t.Logf("seed %d (SLUICE_SEED=%d to replay)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0))
}
