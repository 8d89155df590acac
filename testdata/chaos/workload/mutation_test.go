//go:build sluice_mutation

package workload

import (
	"context"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/mutate"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

var valueSchema = avro.MustParse(`{"type":"record","name":"V","fields":[{"name":"value","type":"string"}]}`)

// racingLoads produces 15 values into one partition, then two load
// attempts planned with different views race: both are created before
// either commits, and commit first, second. It returns the history with a
// final read and the warehouse read back.
func racingLoads(t *testing.T, first, second writers.Split) history.History {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "m"
	addr := startBroker(t, topic, 1)
	rec := history.NewRecorder(nil)
	p, err := NewProducer(rec, ProducerConfig{Bootstrap: addr, Topic: topic, Process: 1, Idempotent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Run(ctx, 15)
	final, err := FinalRead(ctx, rec, 2, addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	wh := t.TempDir()
	fsys, err := filesystem.Open("file://" + wh)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	store := writers.NewStore(fsys, writers.StoreOptions{})
	var ws []*writers.SplitWriter
	for _, s := range []writers.Split{first, second} {
		s.Topic = topic
		w, err := writers.NewSplitWriter(store, s, writers.Config{Format: format.Options{Kind: format.JSONLines, MetadataColumns: true}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range final.Records[s.Start:s.End] {
			if err := w.Write(valueSchema, map[string]any{"value": r.Value}, format.Meta{Topic: topic, Partition: 0, Offset: r.Offset, Timestamp: time.Unix(0, 0)}); err != nil {
				t.Fatal(err)
			}
		}
		ws = append(ws, w)
	}
	for i, w := range ws {
		inv := rec.Invoke(10+i, history.Load)
		_, err := w.Commit(w.Attempt().Split().End)
		op := history.Op{Outcome: history.OK}
		if err != nil {
			op.Outcome, op.Error = history.Fail, err.Error()
		}
		inv.Complete(op)
	}
	if _, err := ReadWarehouse(ctx, rec, 3, wh, topic, []int32{0}); err != nil {
		t.Fatal(err)
	}
	return rec.History()
}

// expect runs scenario without the mutation (clean) and with it (the
// checker must report want).
func expect(t *testing.T, name string, want history.AnomalyKind, scenario func(t *testing.T) history.History) {
	t.Run("off", func(t *testing.T) {
		t.Setenv(mutate.EnvVar, "")
		h := scenario(t)
		if res := history.Check(h); !res.OK() {
			t.Fatal(res.Report(h, 2))
		}
	})
	t.Run(name, func(t *testing.T) {
		t.Setenv(mutate.EnvVar, name)
		h := scenario(t)
		res := history.Check(h)
		if len(res.Of(want)) == 0 {
			for _, op := range h {
				t.Log(op)
			}
			t.Fatalf("mutation %s: no %s reported:\n%s", name, want, res.Report(h, 2))
		}
		t.Logf("caught:\n%s", res.Report(h, 1))
	})
}

// Without the exclusive manifest create, two attempts of one start with
// different ends both commit: records loaded twice.
func TestMutationExclusiveManifest(t *testing.T) {
	expect(t, mutate.ExclusiveManifest, history.LoadDuplicate, func(t *testing.T) history.History {
		return racingLoads(t, writers.Split{Start: 0, End: 10}, writers.Split{Start: 0, End: 15})
	})
}

// Without the chain rule, an overlapping split of another planner's view
// commits next to the first: records loaded twice.
func TestMutationChain(t *testing.T) {
	expect(t, mutate.Chain, history.LoadDuplicate, func(t *testing.T) history.History {
		return racingLoads(t, writers.Split{Start: 0, End: 10}, writers.Split{Start: 5, End: 15})
	})
}
