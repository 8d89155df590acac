//go:build sluice_mutation

package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/mutate"
	"github.com/sluicehq/sluice/internal/vfs"
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
	if _, err := ReadWarehouse(ctx, rec, 3, wh, topic, []int32{0}, nil); err != nil {
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

// Without the idempotent-sequence check, a producer's retry of a batch the
// broker already appended (its answer lost) is appended again: one value
// at two offsets.
func TestMutationIdempotentSequence(t *testing.T) {
	expect(t, mutate.IdempotentSequence, history.Duplicate, retriedBatch)
}

// retriedBatch takes a producer id (InitProducerId), then sends one
// sequenced batch of one value twice, as a client does whose first answer
// was lost, recorded as one produce acknowledged at the offset of the last
// answer; then a final read.
func retriedBatch(t *testing.T) history.History {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic, value = "idem", "retried-0"
	addr := startBroker(t, topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	init, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(init.ErrorCode)
	}
	if err != nil {
		t.Fatalf("init producer id: %v", err)
	}
	batch := sequencedBatch(init.ProducerID, init.ProducerEpoch, 0, value)
	rec := history.NewRecorder(nil)
	inv := rec.Invoke(1, history.Produce)
	var off int64
	for try := 0; try < 2; try++ {
		if off, err = produceBatch(ctx, cl, topic, batch); err != nil {
			t.Fatalf("send %d: %v", try+1, err)
		}
	}
	inv.Complete(history.Op{Outcome: history.OK, Topic: topic, Partition: 0, Offset: off, Value: value, Idempotent: true, Attempts: 2})
	if _, err := FinalRead(ctx, rec, 2, addr, topic); err != nil {
		t.Fatal(err)
	}
	return rec.History()
}

// produceBatch sends one record batch to partition 0 with acks=all and
// returns the base offset the broker answers.
func produceBatch(ctx context.Context, cl *kgo.Client, topic string, batch []byte) (int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("produce answer shape: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

// sequencedBatch is a RecordBatch v2 of one uncompressed record of value,
// of an idempotent producer at sequence seq.
func sequencedBatch(producerID int64, epoch int16, seq int32, value string) []byte {
	body := []byte{0}                    // attributes
	body = binary.AppendVarint(body, 0)  // timestamp delta
	body = binary.AppendVarint(body, 0)  // offset delta
	body = binary.AppendVarint(body, -1) // no key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	rec := binary.AppendVarint(nil, int64(len(body)))
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: producerID, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: 1, Records: append(rec, body...)}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// Without the fate file's exclusive create, an attempt whose lease expired
// writes its commit intent over recovery's reaped mark and commits while
// recovery deletes its files: the loaded range's records are missing.
func TestMutationFate(t *testing.T) {
	expect(t, mutate.Fate, history.LoadLost, reapedAttemptCommits)
}

// reapedAttemptCommits produces 15 values, writes them as one split
// through a store on an interleaving file system, then runs a recovery
// whose clock is past the attempt's lease (the attempt stalled). Recovery
// reaps the attempt and is held before it deletes the attempt directory;
// the attempt then commits, and once it has claimed its fate (it reaches
// the manifest) recovery's deletion goes first. It returns the history with
// the load and the warehouse read back.
func reapedAttemptCommits(t *testing.T) history.History {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "f"
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
	ifs := &interleaveFS{FS: fsys, manifest: writers.ManifestPath(topic, 0, 0),
		reaped: make(chan struct{}), claimed: make(chan struct{}), removed: make(chan struct{})}
	now := time.Now()
	store := writers.NewStore(ifs, writers.StoreOptions{Lease: time.Minute, Clock: clock.NewManual(now)})
	late := writers.NewStore(ifs, writers.StoreOptions{Lease: time.Minute, Clock: clock.NewManual(now.Add(time.Hour))})
	w, err := writers.NewSplitWriter(store, writers.Split{Topic: topic, Start: 0, End: 15}, writers.Config{Format: format.Options{Kind: format.JSONLines, MetadataColumns: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range final.Records {
		if err := w.Write(valueSchema, map[string]any{"value": r.Value}, format.Meta{Topic: topic, Partition: 0, Offset: r.Offset, Timestamp: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	recovered := make(chan error, 1)
	go func() { _, err := late.Recover(topic, 0); recovered <- err }()
	<-ifs.reaped
	inv := rec.Invoke(10, history.Load)
	_, err = w.Commit(15)
	ifs.claim() // refused before the manifest: let recovery go on
	op := history.Op{Outcome: history.OK}
	if err != nil {
		op.Outcome, op.Error = history.Unknown, err.Error()
	}
	inv.Complete(op)
	if err := <-recovered; err != nil {
		t.Fatal(err)
	}
	if _, err := ReadWarehouse(ctx, rec, 3, wh, topic, []int32{0}, nil); err != nil {
		t.Fatal(err)
	}
	return rec.History()
}

// interleaveFS holds the first deletion of an attempt directory (recovery
// taking a reaped attempt) until the manifest is about to be created (the
// attempt has claimed its fate) or claim is called, and holds that
// manifest until the deletion is done.
type interleaveFS struct {
	vfs.FS
	manifest                 string
	reaped, claimed, removed chan struct{}
	removeOnce, claimOnce    sync.Once
	manifestOnce, reapedOnce sync.Once
}

func (f *interleaveFS) claim() { f.claimOnce.Do(func() { close(f.claimed) }) }

func (f *interleaveFS) RemoveAll(name string) error {
	held := false
	if strings.HasPrefix(name, "_sluice/tmp/") {
		f.removeOnce.Do(func() { held = true })
	}
	if !held {
		return f.FS.RemoveAll(name)
	}
	f.reapedOnce.Do(func() { close(f.reaped) })
	<-f.claimed
	defer close(f.removed)
	return f.FS.RemoveAll(name)
}

func (f *interleaveFS) WriteExclusive(name string, data []byte) error {
	held := false
	if name == f.manifest {
		f.manifestOnce.Do(func() { held = true })
	}
	if held {
		f.claim()
		<-f.removed
	}
	return f.FS.WriteExclusive(name, data)
}

// Without the attempt's lease, recovery reaps an attempt that is alive and
// writing: the fate file still refuses its commit (ErrAttemptExpired), so
// nothing is loaded twice or lost from a committed range, and only the
// progress check sees it: the load-read waited for the final read's ranges
// and no load committed them (load-incomplete). Without Want the same
// history is clean — the vacuous pass the progress check exists to stop.
func TestMutationLease(t *testing.T) {
	expect(t, mutate.Lease, history.LoadIncomplete, func(t *testing.T) history.History {
		h := liveAttemptRecovered(t)
		if mutate.Enabled(mutate.Lease) {
			blind := slices.Clone(h)
			for i := range blind {
				blind[i].Want = nil
			}
			if res := history.Check(blind); !res.OK() {
				t.Fatalf("without Want the checker should see nothing amiss here, it reports:\n%s", res.Report(blind, 1))
			}
		}
		return h
	})
}

// liveAttemptRecovered produces 15 values, starts one attempt of them (a
// worker's split, its lease a minute long and renewed while it writes),
// then runs a recovery of the partition at the same time on the same clock
// (another planner's, a second after the attempt began: the lease is
// alive), then commits the attempt. It returns the history with the load
// and the warehouse read back, waited for up to the final read's ends.
func liveAttemptRecovered(t *testing.T) history.History {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const topic = "l"
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
	clk := clock.NewManual(time.Now())
	store := writers.NewStore(fsys, writers.StoreOptions{Lease: time.Minute, Clock: clk})
	planner := writers.NewStore(fsys, writers.StoreOptions{Lease: time.Minute, Clock: clk})
	inv := rec.Invoke(10, history.Load)
	w, err := writers.NewSplitWriter(store, writers.Split{Topic: topic, Start: 0, End: 15}, writers.Config{Format: format.Options{Kind: format.JSONLines, MetadataColumns: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range final.Records {
		if err := w.Write(valueSchema, map[string]any{"value": r.Value}, format.Meta{Topic: topic, Partition: 0, Offset: r.Offset, Timestamp: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Second)
	rep, err := planner.Recover(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recovery while the attempt lives: %+v", rep)
	_, err = w.Commit(15)
	op := history.Op{Outcome: history.OK}
	switch {
	case errors.Is(err, writers.ErrAttemptExpired):
		op.Outcome, op.Error = history.Fail, err.Error()
	case err != nil:
		t.Fatalf("commit: %v", err)
	}
	inv.Complete(op)
	if _, err := ReadWarehouse(ctx, rec, 3, wh, topic, []int32{0}, final.Ranges); err != nil {
		t.Fatal(err)
	}
	return rec.History()
}
