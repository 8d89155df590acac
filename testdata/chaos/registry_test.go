package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
)

// The schema registry's promise as a history: an id is a position of the
// pseudo-topic idTopic, a schema (named uniquely) a value. A registration is
// a produce acknowledged at offset = id; a read of an id is a read of that
// position. The checker's inconsistent anomaly is then an id naming two
// schemas, duplicate one schema under two ids (a retried registration must
// find its first id), lost a registered id that a registry no longer knows.
const idTopic = "_schema_ids"

// TestRegistryIDsWhileBrokerRestarts: two `sluice registry` processes
// register schemas concurrently while their broker is killed and restarted
// (and paused); afterwards both registries are asked for every id.
func TestRegistryIDsWhileBrokerRestarts(t *testing.T) {
	r := harness.NewRun(t, "registry", 10*time.Second)
	b := startBroker(t, r, "broker", "num.partitions=1\n")
	var regs []string
	for _, name := range []string{"r1", "r2"} {
		n := r.Reserve(name)
		url := fmt.Sprintf("http://%s:%d", n.Addr, harness.FreePort(t, n.Addr))
		n.Define(harness.Spec{Args: []string{harness.SluiceBinary(t), "registry", "--listen", url[len("http://"):], "--bootstrap", b.HostPort},
			Ready: func(line string) bool { return strings.Contains(line, "schema registry listening on") }})
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		regs = append(regs, url)
	}
	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
		Steps:   harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "kill", "pause"),
		Nemeses: []harness.Nemesis{&harness.Kill{Nodes: []*harness.Node{b.Node}}, &harness.Pause{Nodes: []*harness.Node{b.Node}}}}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+time.Minute)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := 1; p <= 4; p++ {
		url := regs[p%2]
		wg.Add(1)
		go func() { defer wg.Done(); registerSchemas(wctx, rec, url, p) }()
	}
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	stop()
	wg.Wait()
	for i, url := range regs {
		readIDs(ctx, t, rec, url, 10+i)
	}
	st.close()
	closeHistory()
	res := verdict(t, r, sched, rec.History(), st, harness.Report{History: historyPath(r),
		Notes: []string{"2 registries on one broker; no id ever names two schemas"}})
	if res.Stats.ProducedOK == 0 {
		t.Errorf("no schema was registered")
	}
}

// schemaText is the Avro schema named name.
func schemaText(name string) string {
	return fmt.Sprintf(`{"type":"record","name":%q,"fields":[{"name":"f","type":"string"}]}`, name)
}

// registerSchemas registers schemas S<p>_<i> under subjects of their own at
// url until ctx ends; a registration whose answer was lost is retried
// until it gets one, as a client must. A registration is idempotent (the
// registry answers a schema registered again with its id), so its produces
// say so: a schema under two ids is a duplicate however often it was sent.
func registerSchemas(ctx context.Context, rec *history.Recorder, url string, p int) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return
	}
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("S%d_%d", p, i)
		for ctx.Err() == nil {
			op := rec.Invoke(p, history.Produce)
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			ss, err := cl.CreateSchema(rctx, "subject-"+name, sr.Schema{Schema: schemaText(name)})
			cancel()
			if err == nil {
				op.Complete(history.Op{Outcome: history.OK, Topic: idTopic, Offset: int64(ss.ID), Value: name, Idempotent: true})
				break
			}
			op.Complete(history.Op{Outcome: history.Unknown, Topic: idTopic, Offset: -1, Value: name, Idempotent: true, Error: err.Error()})
		}
	}
}

// readIDs asks the registry at url for every id up to the highest one
// acknowledged, as one final read (process p).
func readIDs(ctx context.Context, t *testing.T, rec *history.Recorder, url string, p int) {
	t.Helper()
	top := int64(0)
	for _, op := range rec.History() {
		if op.Kind == history.Produce && op.Outcome == history.OK {
			top = max(top, op.Offset)
		}
	}
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	op := rec.Invoke(p, history.FinalRead)
	var recs []history.Record
	for id := int64(1); id <= top; id++ {
		var s sr.Schema
		for try := 0; ; try++ {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			s, err = cl.SchemaByID(rctx, int(id))
			cancel()
			if err == nil || try == 20 || isNotFound(err) {
				break
			}
		}
		if isNotFound(err) {
			continue // no schema has that id
		}
		if err != nil {
			op.Complete(history.Op{Outcome: history.Fail, Error: err.Error()})
			t.Fatalf("read id %d from %s: %v", id, url, err)
		}
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(s.Schema), &named); err != nil {
			t.Fatalf("id %d: schema %q: %v", id, s.Schema, err)
		}
		recs = append(recs, history.Record{Topic: idTopic, Offset: id, Value: named.Name})
	}
	op.Complete(history.Op{Outcome: history.OK, Records: recs, Ranges: []history.Range{{Topic: idTopic, Start: 1, End: top + 1}}})
}

func isNotFound(err error) bool {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode == 404
	}
	return false
}
