package workload

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// startBroker runs an in-process sluice broker (testdata/harness/sluice)
// with topic created (partitions partitions); it stops at cleanup.
func startBroker(t *testing.T, topic string, partitions int32) []string {
	t.Helper()
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	sluice.CreateTopic(t, b.Addr, topic, partitions)
	return []string{b.Addr}
}

func checkClean(t *testing.T, rec *history.Recorder) history.History {
	t.Helper()
	h := rec.History()
	if res := history.Check(h); !res.OK() {
		t.Fatal(res.Report(h, 2))
	}
	return h
}

func count(h history.History, kind history.Kind, outcome history.Outcome) int {
	n := 0
	for _, op := range h {
		if op.Kind == kind && op.Outcome == outcome {
			n++
		}
	}
	return n
}

// Producers of every kind, a partition consumer and two group members run
// together against a broker; with no faults the history is clean, every
// produce ok, the final read holds them all and the group committed.
func TestCleanRunPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, parts, perProducer = "chaos", 3, 40
	addr := startBroker(t, topic, parts)
	rec := history.NewRecorder(nil)
	cfgs := []ProducerConfig{
		{Acks: AcksAll, Idempotent: true}, {Acks: AcksAll}, {Acks: AcksLeader},
	}
	var wg sync.WaitGroup
	for i, c := range cfgs {
		c.Bootstrap, c.Topic, c.Partitions, c.Process = addr, topic, parts, i+1
		p, err := NewProducer(rec, c)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Add(1)
		go func() { defer wg.Done(); p.Run(ctx, perProducer) }()
	}
	total := len(cfgs) * perProducer
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := Consume(ctx, rec, ConsumerConfig{Bootstrap: addr, Topic: topic, Partitions: []int32{0, 1, 2}, Process: 10,
			Until: func(n int) bool { return n >= total }}); err != nil {
			t.Error(err)
		}
	}()
	var mu sync.Mutex
	groupPolled := [2]int{} // what each member polled: they stop when together they polled all
	for m := 0; m < 2; m++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ConsumeGroup(ctx, rec, GroupConfig{Bootstrap: addr, Topic: topic, Group: "g", Process: 20 + m,
				Until: func(n int) bool {
					mu.Lock()
					defer mu.Unlock()
					groupPolled[m] = n
					return groupPolled[0]+groupPolled[1] >= total
				}})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("timed out")
	}
	if _, err := FinalRead(ctx, rec, 99, addr, topic); err != nil {
		t.Fatal(err)
	}
	h := checkClean(t, rec)
	if n := count(h, history.Produce, history.OK); n != total {
		t.Fatalf("%d produces ok, want %d", n, total)
	}
	if count(h, history.Commit, history.OK) == 0 || count(h, history.Assign, history.OK) < 2 {
		t.Fatalf("no commits or assigns recorded:\n%s", history.Check(h).Report(h, 0))
	}
}

// A load of the topic, read back from the warehouse: every produced value
// loaded exactly once.
func TestLoadRunPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, parts = "loaded", 2
	addr := startBroker(t, topic, parts)
	rec := history.NewRecorder(nil)
	p, err := NewProducer(rec, ProducerConfig{Bootstrap: addr, Topic: topic, Partitions: parts, Process: 1, Idempotent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	wh := t.TempDir()
	spec, err := LoadSpec(t.TempDir(), LoadConfig{Name: "chaos-load", Bootstrap: addr, Topic: topic, Warehouse: wh, MaxRecordsPerTask: 7})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		p.Run(ctx, 25)
		if _, err := RunLoad(ctx, rec, 2, spec, jobs.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	final, err := FinalRead(ctx, rec, 4, addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ReadWarehouse(ctx, rec, 3, wh, topic, []int32{0, 1}, final.Ranges)
	if err != nil {
		t.Fatal(err)
	}
	h := checkClean(t, rec)
	if len(l.Records) != 50 || len(l.Ranges) == 0 {
		t.Fatalf("load-read %d records, %d ranges", len(l.Records), len(l.Ranges))
	}
	if n := count(h, history.Produce, history.OK); n != 50 {
		t.Fatalf("%d produces ok", n)
	}
}

// Values a producer encodes (JSON carrying the value) are read back by
// FinalReadDecoded; the history keeps the values, so it is clean, and a
// final read that does not decode sees values never written.
func TestEncodedValuesReadBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, parts = "encoded", 2
	addr := startBroker(t, topic, parts)
	encode := func(v string) []byte { return []byte(`{"id":"` + v + `"}`) }
	decode := func(b []byte) string { return strings.TrimSuffix(strings.TrimPrefix(string(b), `{"id":"`), `"}`) }
	rec := history.NewRecorder(nil)
	p, err := NewProducer(rec, ProducerConfig{Bootstrap: addr, Topic: topic, Partitions: parts, Process: 1, Encode: encode})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Run(ctx, 20)
	raw := history.NewRecorder(nil)
	for _, op := range rec.History() {
		raw.Invoke(op.Process, op.Kind).Complete(op)
	}
	final, err := FinalReadDecoded(ctx, rec, 9, addr, topic, decode)
	if err != nil {
		t.Fatal(err)
	}
	if len(final.Records) != 20 || final.Records[0].Value[0] == '{' {
		t.Fatalf("final read %d records, first %+v", len(final.Records), final.Records[0])
	}
	checkClean(t, rec)
	if _, err := FinalRead(ctx, raw, 9, addr, topic); err != nil {
		t.Fatal(err)
	}
	if res := history.Check(raw.History()); res.OK() {
		t.Fatal("a final read of the encoded bytes checked clean")
	}
}
