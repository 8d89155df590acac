package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	zkharness "github.com/sluicehq/sluice/testdata/harness/zk"
)

// brokerCluster is a sluice cluster of broker processes (the built
// `sluice broker` binary, --zookeeper, --node-id 1..n) on a real
// ZooKeeper, each with its own data directory and loopback port.
type brokerCluster struct {
	t       *testing.T
	zk      *zkharness.Server
	connect string
	brokers map[int32]*kafka.Sluice
	// net is set by startBrokerClusterOnNetwork: the chaos harness's run
	// whose network every broker and ZooKeeper sit on.
	net *clusterNet
}

// clusterNet is where a cluster started on the chaos harness's network
// lives: a run (its nft table and cgroups), ZooKeeper's node and each
// broker's own address 127.0.S.N (without the port).
type clusterNet struct {
	run   *harness.Run
	zk    *harness.ZooKeeper
	addrs map[int32]string
}

// clusterSession is the brokers' ZooKeeper session timeout: a killed
// broker is dead to the cluster this long after.
const clusterSession = 2 * time.Second

// startBrokerCluster starts ZooKeeper and n brokers; props are extra
// server.properties lines for every broker.
func startBrokerCluster(t *testing.T, n int, props ...string) *brokerCluster {
	t.Helper()
	z := zkharness.Start(t)
	c := &brokerCluster{t: t, zk: z, connect: z.Connect("/sluice-test"), brokers: map[int32]*kafka.Sluice{}}
	cfg := filepath.Join(t.TempDir(), "server.properties")
	lines := append([]string{fmt.Sprintf("zookeeper.session.timeout.ms=%d", clusterSession.Milliseconds()),
		"group.initial.rebalance.delay.ms=0"}, props...)
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for id := int32(1); id <= int32(n); id++ {
		c.brokers[id] = kafka.StartSluice(t, "--zookeeper", c.connect, "--node-id", fmt.Sprint(id), "--config", cfg, "--log-level", "info")
	}
	t.Cleanup(func() {
		if t.Failed() {
			for id, b := range c.brokers {
				t.Logf("broker %d log (tail):\n%s", id, tailOf(b.Output(), 6000))
			}
		}
	})
	c.waitBrokers(c.ids()...)
	return c
}

// startBrokerClusterOnNetwork is startBrokerCluster with ZooKeeper and
// each broker on its own loopback address of a chaos harness run
// (testdata/chaos/harness: a cgroup per node whose sockets are SNATed to
// the node's address), so that c.net.run.Net.Partition and Cut can cut any
// pair of them. A broker is started through a shell wrapper that enters
// its node's cgroup before it execs sluice (every socket it makes is the
// node's) and listens on the node's address instead of 127.0.0.1.
func startBrokerClusterOnNetwork(t *testing.T, scenario string, n int, props ...string) *brokerCluster {
	t.Helper()
	run := harness.NewRun(t, scenario, 30*time.Second)
	// NewRun builds the harness's own sluice binary, which only
	// harness.Main removes; this package's TestMain is kafka.Main, and its
	// brokers run kafka.SluiceBinary, so the harness's copy is removed
	// here (NewRun only asks for its path, it never runs it again).
	t.Cleanup(func() {
		if dir := filepath.Dir(harness.SluiceBinary(t)); strings.HasPrefix(filepath.Base(dir), "sluice-chaos-bin-") {
			os.RemoveAll(dir)
		}
	})
	z := run.ZooKeeper("zk", run.WorkDir("zk"))
	if err := z.Start(); err != nil {
		t.Fatal(err)
	}
	cgroup2, err := cgroup2Mount()
	if err != nil {
		t.Fatal(err)
	}
	c := &brokerCluster{t: t, connect: z.Connect("/sluice-test"), brokers: map[int32]*kafka.Sluice{},
		net: &clusterNet{run: run, zk: z, addrs: map[int32]string{}}}
	cfg := filepath.Join(t.TempDir(), "server.properties")
	lines := append([]string{fmt.Sprintf("zookeeper.session.timeout.ms=%d", clusterSession.Milliseconds()),
		"group.initial.rebalance.delay.ms=0"}, props...)
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := kafka.SluiceBinary(t)
	for id := int32(1); id <= int32(n); id++ {
		node := run.Reserve(fmt.Sprintf("broker%d", id))
		procs := filepath.Join(cgroup2, run.Net.Table, node.Name, "cgroup.procs")
		wrapper := filepath.Join(run.WorkDir("bin"), node.Name)
		script := fmt.Sprintf("#!/bin/sh\n# %s: enter the node's cgroup, listen on its address\n"+
			"echo $$ > %s || exit 1\n"+
			"for a; do shift; [ \"$a\" = 127.0.0.1:0 ] && a=%s:0; set -- \"$@\" \"$a\"; done\n"+
			"exec %s \"$@\"\n", node.Name, procs, node.Addr, bin)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := kafka.StartSluiceProcess(wrapper, t.TempDir(), "--zookeeper", c.connect, "--node-id", fmt.Sprint(id), "--config", cfg, "--log-level", "info")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Stop)
		if host, _, _ := strings.Cut(b.Addr, ":"); host != node.Addr {
			t.Fatalf("broker %d listens on %s, not on its node's address %s", id, b.Addr, node.Addr)
		}
		c.brokers[id], c.net.addrs[id] = b, node.Addr
	}
	t.Cleanup(func() {
		if t.Failed() {
			for id, b := range c.brokers {
				t.Logf("broker %d log (tail):\n%s", id, tailOf(b.Output(), 6000))
			}
			t.Logf("harness events:\n%v\nZooKeeper log (tail):\n%s", run.Events, tailOf(z.Log(), 3000))
		}
	})
	c.waitBrokers(c.ids()...)
	return c
}

// cgroup2Mount is where the cgroup2 file system is mounted (the harness
// makes its run's cgroups there, under the run's nft table name).
func cgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "cgroup2" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("no cgroup2 file system is mounted: the chaos harness's network needs one")
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (c *brokerCluster) ids() []int32 {
	out := make([]int32, 0, len(c.brokers))
	for id := range c.brokers {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// bootstrap lists every broker's address.
func (c *brokerCluster) bootstrap(except ...int32) []string {
	var out []string
	for _, id := range c.ids() {
		if !slices.Contains(except, id) {
			out = append(out, c.brokers[id].Addr)
		}
	}
	return out
}

// client is a franz-go client bootstrapped with every broker.
func (c *brokerCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.bootstrap()...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// request sends req to broker id alone.
func (c *brokerCluster) request(id int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers[id].Addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// metadata asks broker id about topics (none: all).
func (c *brokerCluster) metadata(id int32, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := c.request(id, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// eventually polls cond until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitBrokers waits until every listed broker's Metadata lists exactly ids.
func (c *brokerCluster) waitBrokers(ids ...int32) {
	c.t.Helper()
	for _, asked := range ids {
		eventually(c.t, 30*time.Second, fmt.Sprintf("broker %d lists brokers %v", asked, ids), func() error {
			m, err := c.metadata(asked)
			if err != nil {
				return err
			}
			var got []int32
			for _, b := range m.Brokers {
				got = append(got, b.NodeID)
			}
			slices.Sort(got)
			if !slices.Equal(got, ids) {
				return fmt.Errorf("brokers %v", got)
			}
			if m.ControllerID < 0 {
				return fmt.Errorf("no controller")
			}
			return nil
		})
	}
}

// partitionView is one partition as Metadata answers it.
type partitionView struct {
	Leader, Epoch          int32
	Replicas, ISR, Offline []int32
	Code                   int16
}

// topicView asks broker id for topic's partitions.
func (c *brokerCluster) topicView(id int32, topic string) (map[int32]partitionView, error) {
	m, err := c.metadata(id, topic)
	if err != nil {
		return nil, err
	}
	if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("broker %d: topic %s: %+v", id, topic, m.Topics)
	}
	out := map[int32]partitionView{}
	for _, p := range m.Topics[0].Partitions {
		out[p.Partition] = partitionView{Leader: p.Leader, Epoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: sorted(p.ISR),
			Offline: sorted(p.OfflineReplicas), Code: p.ErrorCode}
	}
	return out, nil
}

func sorted(xs []int32) []int32 {
	out := slices.Clone(xs)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// waitLeaders waits until every listed broker answers the same view of
// topic, with n partitions, each led by a live broker; it returns the view.
func (c *brokerCluster) waitLeaders(topic string, n int, asked ...int32) map[int32]partitionView {
	c.t.Helper()
	var agreed map[int32]partitionView
	eventually(c.t, 40*time.Second, "every broker agrees on the leaders of "+topic, func() error {
		var first string
		for _, id := range asked {
			v, err := c.topicView(id, topic)
			if err != nil {
				return err
			}
			if len(v) != n {
				return fmt.Errorf("broker %d: %d partitions, want %d", id, len(v), n)
			}
			for p, pv := range v {
				if pv.Code != 0 || pv.Leader < 0 || !slices.Contains(asked, pv.Leader) {
					return fmt.Errorf("broker %d: partition %d: %+v", id, p, pv)
				}
			}
			s := fmt.Sprint(sortedView(v))
			if first == "" {
				first, agreed = s, v
			} else if s != first {
				return fmt.Errorf("broker %d answers %s, broker %d %s", id, s, asked[0], first)
			}
		}
		return nil
	})
	return agreed
}

func sortedView(v map[int32]partitionView) []string {
	var out []string
	for p, pv := range v {
		out = append(out, fmt.Sprintf("%d:%+v", p, pv))
	}
	sort.Strings(out)
	return out
}

// partitionDirs lists the partition directories of topic in broker id's data dir.
func (c *brokerCluster) partitionDirs(id int32, topic string) []int32 {
	entries, _ := os.ReadDir(c.brokers[id].DataDir)
	var out []int32
	for _, e := range entries {
		var p int32
		if rest, ok := strings.CutPrefix(e.Name(), topic+"-"); ok && e.IsDir() {
			if _, err := fmt.Sscan(rest, &p); err == nil && fmt.Sprint(p) == rest {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}
