package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

const loadJob = "chaos-load"

// TestLoaderUnderFaults: the distributed loader — two schedulers (a leader
// and a standby), three workers, ZooKeeper, each a real process on its own
// address — loads a topic that records stream into, while workers, the
// schedulers and ZooKeeper are killed, paused and cut off. Afterwards every
// acknowledged record must be loaded exactly once (load-lost,
// load-duplicate, load-incomplete), and no hour may carry _SUCCESS without every record of
// it that was acknowledged before the run that marked it began.
func TestLoaderUnderFaults(t *testing.T) {
	r := harness.NewRun(t, "loader", 24*time.Second) // long enough for each of the four faults once
	b := startBroker(t, r, "broker", fmt.Sprintf("num.partitions=%d\n", loadPartitions))
	sluice.CreateTopic(t, b.HostPort, "chaos", loadPartitions)
	zk := r.ZooKeeper("zk", r.WorkDir("zk"))
	if err := zk.Start(); err != nil {
		t.Fatal(err)
	}
	out := r.WorkDir("warehouse")
	jobsDir := r.WorkDir("jobs")
	spec := fmt.Sprintf("name: %s\nsource:\n  bootstrap: [%s]\n  topics: [chaos]\n  start: earliest\n  max_records_per_task: 300\n"+
		"decode: {format: json}\npartition: {by: hour, time_field: ts, timezone: UTC}\n"+
		"output: {uri: \"file://%s\", format: jsonl, metadata_columns: true}\nschedule: \"* * * * * *\"\n", loadJob, b.HostPort, out)
	if err := os.WriteFile(filepath.Join(jobsDir, loadJob+".yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	connect := zk.Connect("/sluice-chaos")
	var targets, schedulers []*harness.Node
	for _, name := range []string{"s1", "s2"} {
		n := r.Sluice(name, "sluice scheduler running", "scheduler", "--jobs", jobsDir, "--zookeeper", connect,
			"--session-timeout", "2s", "--min-interval", "1s", "--scan-interval", "1s", "--name", name)
		targets, schedulers = append(targets, n), append(schedulers, n)
	}
	for _, name := range []string{"w1", "w2", "w3"} {
		targets = append(targets, r.Sluice(name, "sluice worker taking tasks", "worker", "--zookeeper", connect,
			"--session-timeout", "2s", "--name", name))
	}
	for _, n := range targets {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	targets = append(targets, zk.Node)
	var peers []string
	for _, n := range r.Nodes() {
		peers = append(peers, n.Addr)
	}

	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	events := newEventClock(time.Now())
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
		Steps: harness.RandomSchedule(r.Rand, r.Duration, 3*time.Second, "kill", "kill-leader", "pause", "partition"),
		Nemeses: []harness.Nemesis{&harness.Kill{Nodes: targets}, &harness.Pause{Nodes: targets},
			&harness.Aimed{As: "kill-leader", Nemesis: &harness.Kill{Nodes: schedulers}, Target: leaderOf(zk.HostPort, "/sluice-chaos")},
			&harness.Isolate{Net: r.Net, Nodes: targets, Peers: peers}}}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+2*time.Minute)
	defer cancel()
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 1, 2, events.encode, 20*time.Millisecond)
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	load.stop()
	for _, n := range targets { // every process back for the catch-up
		if !n.Running() {
			if err := n.Start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	final := finalRead(t, rec, b.HostPort, "chaos")
	ends := map[int32]int64{}
	for _, rg := range final.Ranges {
		ends[rg.Partition] = rg.End
	}
	r.Note("loader", "catching up", fmt.Sprintf("to high watermarks %v", ends))
	if err := waitLoaded(ctx, out, ends); err != nil {
		t.Error(err)
	}
	op := rec.Invoke(0, history.LoadRead)
	loaded, err := readWarehouse(out)
	if err != nil {
		op.Complete(history.Op{Outcome: history.Fail, Error: err.Error()})
		t.Fatal(err)
	}
	op.Complete(history.Op{Outcome: history.OK, Records: loaded.records, Ranges: loaded.ranges, Want: final.Ranges})
	st.close()
	closeHistory()
	h := rec.History()
	res := history.Check(h)
	notes := []string{"2 schedulers, 3 workers, ZooKeeper; every record loaded exactly once; _SUCCESS only on complete hours"}
	incomplete, marked, err := checkSuccess(out, h, st, events, loaded, nil)
	if err != nil {
		t.Error(err)
	}
	for _, msg := range incomplete {
		res.Anomalies = append(res.Anomalies, history.Anomaly{Kind: "success-incomplete", Detail: msg})
	}
	notes = append(notes, fmt.Sprintf("%d hours marked _SUCCESS, %d records loaded", marked, len(loaded.records)))
	report(t, r, sched, h, res, st, harness.Report{History: historyPath(r), Notes: notes})
	if marked == 0 {
		t.Errorf("no hour was marked _SUCCESS: the completeness check had nothing to check")
	}
	leaderKills := 0
	for _, e := range r.Events.List() {
		if e.Target == "kill-leader" && e.What == "fault" {
			leaderKills++
		}
	}
	if leaderKills == 0 {
		t.Errorf("the leading scheduler was never killed: the failover went unchecked")
	}
}

// leaderOf finds the scheduler that leads: the name in the election's
// ephemeral /leader node under chroot (scheduler/cluster's layout), waiting
// up to 15 s for one to hold it (after ZooKeeper's restart or a failover).
func leaderOf(server, chroot string) func() (string, error) {
	return func() (string, error) {
		c, _, err := gozk.Connect([]string{server}, 5*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quietZK{}))
		if err != nil {
			return "", err
		}
		defer c.Close()
		timeout := time.After(15 * time.Second)
		for {
			ok, _, ch, err := c.ExistsW(chroot + "/leader")
			if err != nil {
				return "", fmt.Errorf("leader: %w", err)
			}
			if ok {
				b, _, err := c.Get(chroot + "/leader")
				if err == nil {
					return string(b), nil
				}
				if !errors.Is(err, gozk.ErrNoNode) {
					return "", fmt.Errorf("leader: %w", err)
				}
				continue // gone between the two: ask again
			}
			select {
			case <-ch:
			case <-timeout:
				return "", errors.New("leader: no scheduler holds /leader after 15s")
			}
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// eventClock stamps records with an event time that runs 240 times faster
// than the wall clock from three hours ago, so a short run crosses hours
// that the loader can mark complete; it remembers each value's time.
type eventClock struct {
	wall0, event0 time.Time

	mu sync.Mutex // guards at
	at map[string]time.Time
}

func newEventClock(now time.Time) *eventClock {
	return &eventClock{wall0: now, event0: now.Add(-3 * time.Hour).Truncate(time.Hour).Add(50 * time.Minute), at: map[string]time.Time{}}
}

func (c *eventClock) encode(value string) []byte {
	ts := c.event0.Add(240 * time.Since(c.wall0)).UTC().Truncate(time.Millisecond)
	c.mu.Lock()
	c.at[value] = ts
	c.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"id": value, "ts": ts.Format(time.RFC3339Nano)})
	return b
}

func (c *eventClock) time(value string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[value]
	return t, ok
}

// waitLoaded polls the warehouse's manifests until each partition's chain
// reaches its end offset.
func waitLoaded(ctx context.Context, out string, ends map[int32]int64) error {
	for {
		got, err := manifestEnds(out)
		done := err == nil
		for p, end := range ends {
			if end > 0 && got[p] < end {
				done = false
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loads did not catch up to %v: loaded %v (%v)", ends, got, err)
		case <-time.After(250 * time.Millisecond): // polling the warehouse the processes write
		}
	}
}

// loadPartitions is the chaos topic's partition count in the loader scenario.
const loadPartitions = 3

// manifests reads every commit manifest of the chaos topic through the
// writers' store (the commit protocol's own reader).
func manifests(out string) ([]*writers.Manifest, error) {
	fsys, err := filesystem.Open("file://" + out)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	store := writers.NewStore(fsys, writers.StoreOptions{})
	var ms []*writers.Manifest
	for p := int32(0); p < loadPartitions; p++ {
		got, err := store.Commits("chaos", p)
		if err != nil {
			return nil, err
		}
		ms = append(ms, got...)
	}
	return ms, nil
}

func manifestEnds(out string) (map[int32]int64, error) {
	ms, err := manifests(out)
	ends := map[int32]int64{}
	for _, m := range ms {
		ends[m.Partition] = max(ends[m.Partition], m.End)
	}
	return ends, err
}

// warehouse is what a reader of the output sees.
type warehouse struct {
	records []history.Record
	ranges  []history.Range
	dirOf   map[string][]string // time directories each value was found in
}

// readWarehouse reads every row of every file in the time directories (as
// a downstream reader would), and the committed ranges from the manifests.
func readWarehouse(out string) (*warehouse, error) {
	w := &warehouse{dirOf: map[string][]string{}}
	files, err := filepath.Glob(filepath.Join(out, "dt=*", "hr=*", "*"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "_") || strings.HasPrefix(base, ".") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(out, filepath.Dir(f))
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var row struct {
				ID        string `json:"id"`
				Topic     string `json:"_topic"`
				Partition int32  `json:"_partition"`
				Offset    int64  `json:"_offset"`
			}
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			w.records = append(w.records, history.Record{Topic: row.Topic, Partition: row.Partition, Offset: row.Offset, Value: row.ID})
			w.dirOf[row.ID] = append(w.dirOf[row.ID], rel)
		}
	}
	ms, err := manifests(out)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		w.ranges = append(w.ranges, history.Range{Topic: m.Topic, Partition: m.Partition, Start: m.Start, End: m.End})
	}
	return w, nil
}

// checkSuccess checks each hour marked _SUCCESS: every record of that hour
// acknowledged before the run that marked it began must be loaded there.
// It returns one line per breach and how many hours were marked. wall maps
// a reading of the named scheduler's clock ("" for any) to the wall-clock
// time it was taken at, or a time before (nil: the clocks are the wall
// clock).
func checkSuccess(out string, h history.History, st *stamps, ev *eventClock, w *warehouse, wall func(scheduler string, reading time.Time) time.Time) ([]string, int, error) {
	if wall == nil {
		wall = func(_ string, t time.Time) time.Time { return t }
	}
	fsys, err := filesystem.NewLocal(out)
	if err != nil {
		return nil, 0, err
	}
	runs, err := scheduler.NewHistory(fsys, loadJob).List()
	if err != nil {
		return nil, 0, err
	}
	started := map[string]time.Time{}
	for _, run := range runs {
		started[run.ID] = wall(run.Scheduler, run.Started)
	}
	markers, err := filepath.Glob(filepath.Join(out, "dt=*", "hr=*", scheduler.SuccessInfo))
	if err != nil {
		return nil, 0, err
	}
	var bad []string
	for _, mk := range markers {
		b, err := os.ReadFile(mk)
		if err != nil {
			return nil, 0, err
		}
		var sr scheduler.SuccessRecord
		if err := json.Unmarshal(b, &sr); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", mk, err)
		}
		runStart, ok := started[sr.Run]
		if !ok {
			runStart = wall("", sr.Marked) // no run record: the marking time bounds the planning
		}
		dir, _ := filepath.Rel(out, filepath.Dir(mk))
		for _, op := range h {
			if op.Kind != history.Produce || op.Outcome != history.OK {
				continue
			}
			ts, ok := ev.time(op.Value)
			if !ok || ts.Before(sr.Start) || !ts.Before(sr.End) {
				continue
			}
			if _, acked := st.span([]int{op.ID}); !acked.Before(runStart) {
				continue // acknowledged while (or after) the run planned: may be late
			}
			found := false
			for _, d := range w.dirOf[op.Value] {
				found = found || d == dir
			}
			if !found {
				bad = append(bad, fmt.Sprintf("%s has _SUCCESS (run %s) without %q (op %d), acknowledged before that run began", dir, sr.Run, op.Value, op.ID))
			}
		}
	}
	return bad, len(markers), nil
}
