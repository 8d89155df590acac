package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/chaos/harness"
)

// startBroker makes and starts a broker node with the given properties (a
// --config file) and returns it.
func startBroker(t *testing.T, r *harness.Run, name string, props string) *harness.Broker {
	t.Helper()
	dir := r.WorkDir(name)
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	b := r.Broker(name, filepath.Join(dir, "data"), "--config", cfg)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	return b
}

// createTopic creates topic with partitions on the broker at addr.
func createTopic(t *testing.T, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// TestBrokerKillPause: one broker killed (kill -9) and paused (SIGSTOP)
// while producers write unique values with acks=all or acks=1, with
// flush.messages=1 or the default (page cache). A process kill loses
// nothing acknowledged in every variant: the page cache outlives the
// process. The final read after the faults must hold every acknowledged
// value exactly once, at its acknowledged offset.
func TestBrokerKillPause(t *testing.T) {
	for _, v := range []struct {
		acks  string
		flush string
	}{{"all", "1"}, {"all", "default"}, {"1", "1"}, {"1", "default"}} {
		name := fmt.Sprintf("broker-kill-pause-acks-%s-flush-%s", v.acks, v.flush)
		t.Run(name, func(t *testing.T) {
			r := harness.NewRun(t, name, 6*time.Second)
			props := "num.partitions=3\n"
			if v.flush == "1" {
				props += "log.flush.interval.messages=1\n"
			}
			b := startBroker(t, r, "broker", props)
			createTopic(t, b.HostPort, "chaos", 3, nil)
			rec, closeHistory := newHistory(t, r)
			st := newStamps(rec)

			sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
				Steps:   harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "kill", "pause"),
				Nemeses: []harness.Nemesis{&harness.Kill{Nodes: []*harness.Node{b.Node}}, &harness.Pause{Nodes: []*harness.Node{b.Node}}}}
			ctx, cancel := context.WithTimeout(context.Background(), r.Duration+30*time.Second)
			defer cancel()
			load := produceUnique(ctx, t, rec, b.HostPort, "chaos", v.acks, 2)
			if err := sched.Play(ctx); err != nil {
				t.Error(err)
			}
			load.stop()
			finalRead(t, rec, b.HostPort, "chaos", 3)
			st.close()
			closeHistory()
			verdict(r, sched, rec.History(), st, harness.Report{History: historyPath(r),
				Notes: []string{"acks=" + v.acks + ", flush.messages=" + v.flush, "a process kill must lose nothing acknowledged"}})
		})
	}
}
