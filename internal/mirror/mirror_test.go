package mirror_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/mirror"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

func strp(s string) *string { return &s }

// produceMixed writes n records to each partition of topic: keys, a null
// value every 7th, headers every 3rd, explicit timestamps (CreateTime
// topics keep them), and one aborted transaction of 5 records per
// partition that the mirror must not copy.
func produceMixed(t testing.TB, addr, topic string, partitions int32, first, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Date(2026, 11, 3, 13, 0, 0, 0, time.UTC)
	var rs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := first; i < first+n; i++ {
			r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", i%13)),
				Value: []byte(fmt.Sprintf("%s-p%d-%06d", topic, p, i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
			if i%7 == 0 {
				r.Value = nil
			}
			if i%3 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "trace", Value: []byte(fmt.Sprint(i))}, {Key: "empty"}}
			}
			rs = append(rs, r)
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	tx := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionalID(fmt.Sprintf("aborter-%s-%d", topic, first)))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < 5; i++ {
			if err := tx.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("aborted")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort: %v", err)
	}
}

// TestMirrorSluiceToSluice mirrors between two sluice brokers while they
// take records: every committed record of the source is on the target in
// the same partition and order with its key, value (null kept), headers
// and timestamp, aborted source records are not; a LogAppendTime topic's
// timestamps arrive as the records' timestamps; the source's non-default
// configs are on the target; partitions added to a mirrored topic and a
// topic created while the mirror runs are followed; internal topics are
// not mirrored.
func TestMirrorSluiceToSluice(t *testing.T) {
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	createTopic(t, a.Addr, "orders", 3, map[string]*string{"retention.ms": strp("3600000"), "max.message.bytes": strp("2000000")})
	createTopic(t, a.Addr, "stamped", 1, map[string]*string{"message.timestamp.type": strp("LogAppendTime")})
	createTopic(t, a.Addr, "__private", 1, nil)
	createTopic(t, a.Addr, "skipme", 1, nil)
	produceMixed(t, a.Addr, "orders", 3, 0, 300)
	produceMixed(t, a.Addr, "stamped", 1, 0, 50)
	produceMixed(t, a.Addr, "__private", 1, 0, 5)
	produceMixed(t, a.Addr, "skipme", 1, 0, 5)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sel := selection(".*")
	sel.Exclude = regexp.MustCompile("skip.*")
	done := runMirror(t, ctx, mirror.Config{From: a.Addr, To: b.Addr, Selection: sel, Name: "m1",
		CommitInterval: 50 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond, RefreshInterval: 200 * time.Millisecond})
	waitCaughtUp(t, a.Addr, b.Addr, "m1", "orders", "stamped")

	// New partitions and a new topic while it runs.
	adm := kadm.NewClient(client(t, a.Addr))
	if _, err := adm.UpdatePartitions(ctx, 5, "orders"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, a.Addr, "orders-eu", 2, nil)
	produceMixed(t, a.Addr, "orders", 5, 300, 200)
	produceMixed(t, a.Addr, "orders-eu", 2, 0, 100)
	waitCaughtUp(t, a.Addr, b.Addr, "m1", "orders", "stamped", "orders-eu")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("mirror: %v", err)
	}

	for _, topic := range []string{"orders", "stamped", "orders-eu"} {
		src, dst := readCommitted(t, a.Addr, topic), readCommitted(t, b.Addr, topic)
		sameRecords(t, topic, src, dst)
		n := 0
		for _, rs := range dst {
			n += len(rs)
		}
		t.Logf("%s: %d partitions, %d records on both sides", topic, len(dst), n)
	}
	stamped := readCommitted(t, a.Addr, "stamped")[0]
	if stamped[0].timestamp.Year() == 2026 && stamped[0].timestamp.Month() == 11 && stamped[0].timestamp.Day() == 3 {
		t.Fatalf("the source's LogAppendTime topic kept the producer's timestamp %v: the test does not test LogAppendTime", stamped[0].timestamp)
	}

	bAdm := kadm.NewClient(client(t, b.Addr))
	topics, err := bAdm.ListTopicsWithInternal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"__private", "skipme"} {
		if topics.Has(name) {
			t.Fatalf("%s was mirrored", name)
		}
	}
	rcs, err := bAdm.DescribeTopicConfigs(context.Background(), "orders", "stamped", mirror.CheckpointTopic("m1"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{"orders": {"retention.ms": "3600000", "max.message.bytes": "2000000"},
		"stamped":                    {"message.timestamp.type": "CreateTime"},
		mirror.CheckpointTopic("m1"): {"cleanup.policy": "compact", "segment.bytes": "8388608"}}
	for _, rc := range rcs {
		got := map[string]string{}
		for _, c := range rc.Configs {
			if c.Value != nil {
				got[c.Key] = *c.Value
			}
		}
		for k, v := range want[rc.Name] {
			if got[k] != v {
				t.Errorf("target %s: %s = %q, want %q", rc.Name, k, got[k], v)
			}
		}
	}
}

// TestMirrorTranslate moves a consumer group from the source to the
// target: for each partition the group's committed source offset (random,
// seed logged) is translated; a consumer resuming on the target at the
// translated offset reads the record at the group's source offset and
// everything after it (nothing skipped) and rereads no more than the
// records between the two checkpoints around the group's offset.
func TestMirrorTranslate(t *testing.T) {
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	const partitions = 3
	createTopic(t, a.Addr, "clicks", partitions, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runMirror(t, ctx, mirror.Config{From: a.Addr, To: b.Addr, Selection: selection("clicks"), Name: "tr",
		CommitInterval: 20 * time.Millisecond, CheckpointInterval: 150 * time.Millisecond})
	for round := 0; round < 8; round++ { // several checkpoints per partition
		produceMixed(t, a.Addr, "clicks", partitions, round*100, 100)
		time.Sleep(60 * time.Millisecond) // spreads the records over checkpoint intervals; no assertion depends on it
	}
	waitCaughtUp(t, a.Addr, b.Addr, "tr", "clicks")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	src := readCommitted(t, a.Addr, "clicks")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	group := kadm.Offsets{}
	wantAt := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		r := src[p][rng.Intn(len(src[p]))]
		wantAt[p] = r.offset
		group.Add(kadm.Offset{Topic: "clicks", Partition: p, At: r.offset, LeaderEpoch: -1})
	}
	if err := kadm.NewClient(client(t, a.Addr)).CommitAllOffsets(context.Background(), "readers", group); err != nil {
		t.Fatal(err)
	}
	ts, err := mirror.Translate(context.Background(), mirror.TranslateOptions{From: a.Addr, To: b.Addr, Name: "tr", Group: "readers"})
	if err != nil {
		t.Fatalf("translate: %v", err)
	}
	if len(ts) != partitions {
		t.Fatalf("translated %d partitions, want %d: %+v", len(ts), partitions, ts)
	}
	st, err := mirror.ReadState(context.Background(), []kgo.Opt{kgo.SeedBrokers(b.Addr)}, mirror.CheckpointTopic("tr"))
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := kadm.NewClient(client(t, b.Addr)).FetchOffsets(context.Background(), "readers")
	if err != nil {
		t.Fatal(err)
	}
	dst := readCommitted(t, b.Addr, "clicks")
	for _, tr := range ts {
		p := tr.Partition
		o, ok := fetched.Lookup("clicks", p)
		if !ok || o.At != tr.Target {
			t.Fatalf("partition %d: the target's committed offset is %v, translate said %d", p, o, tr.Target)
		}
		// Source offset of each target record, by its timestamp (unique within a partition).
		srcOffset := map[int64]int64{}
		for _, r := range src[p] {
			srcOffset[r.timestamp.UnixMilli()] = r.offset
		}
		var resumed []int64
		for _, r := range dst[p] {
			if r.offset >= tr.Target {
				resumed = append(resumed, srcOffset[r.timestamp.UnixMilli()])
			}
		}
		// Nothing skipped: every source record at or after the group's offset is read.
		var need int
		for _, r := range src[p] {
			if r.offset >= wantAt[p] {
				need++
			}
		}
		var reread, after int
		for _, so := range resumed {
			if so < wantAt[p] {
				reread++
			} else {
				after++
			}
		}
		if after != need {
			t.Fatalf("partition %d: resuming at target offset %d reads %d of the %d records at or after source offset %d", p, tr.Target, after, need, wantAt[p])
		}
		// Reread bound: the records between the checkpoint used and the next one.
		bound := boundAround(st.Checkpoints[mirror.Partition{Topic: "clicks", Partition: p}], st.Positions[mirror.Partition{Topic: "clicks", Partition: p}], wantAt[p])
		if int64(reread) > bound {
			t.Fatalf("partition %d: rereads %d records, more than the %d offsets between the checkpoints around %d", p, reread, bound, wantAt[p])
		}
		t.Logf("partition %d: group at %d → target %d, rereads %d (bound %d, translate says %d offsets)", p, wantAt[p], tr.Target, reread, bound, tr.Reread)
	}
}

// boundAround is the distance in source offsets from the newest mapping
// at or below offset to the oldest mapping above it.
func boundAround(c *mirror.Checkpoints, pos *mirror.Position, offset int64) int64 {
	ms := append([]mirror.Mapping{c.First}, c.History...)
	if pos != nil {
		ms = append(ms, pos.Mapping)
	}
	lo, hi := int64(-1), int64(1<<62)
	for _, m := range ms {
		if m.Source <= offset && m.Source > lo {
			lo = m.Source
		}
		if m.Source > offset && m.Source < hi {
			hi = m.Source
		}
	}
	return hi - lo
}

// TestMirrorStartLatestKeepsItsStart: with --start latest, a partition the
// mirror started but copied nothing from keeps that start across a
// restart: records produced while the mirror was down are copied, not
// skipped by resolving "latest" again.
func TestMirrorStartLatestKeepsItsStart(t *testing.T) {
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	createTopic(t, a.Addr, "late", 1, nil)
	produceMixed(t, a.Addr, "late", 1, 0, 20) // before the mirror's start: not copied
	run := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := <-runMirror(t, ctx, mirror.Config{From: a.Addr, To: b.Addr, Selection: selection("late"), Name: "lt",
			Start: "latest", CommitInterval: 20 * time.Millisecond, ExitWhenCaughtUp: true}); err != nil || ctx.Err() != nil {
			t.Fatalf("mirror: %v (%v)", err, ctx.Err())
		}
	}
	run()
	produceMixed(t, a.Addr, "late", 1, 20, 30) // while the mirror is down
	run()
	src, dst := readCommitted(t, a.Addr, "late")[0], readCommitted(t, b.Addr, "late")[0]
	if len(dst) != 30 || !dst[0].same(src[20]) || !dst[29].same(src[49]) {
		t.Fatalf("the target holds %d records, want the 30 produced after the mirror's first start: %v", len(dst), dst)
	}
}

// TestMirrorRefusesRecreatedTopic: a source topic deleted and created again
// under the same name, with more records than the mirror's position, is
// refused (its topic ID changed) instead of being copied from the old
// position on, which would skip the new topic's first records uncounted.
func TestMirrorRefusesRecreatedTopic(t *testing.T) {
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	createTopic(t, a.Addr, "again", 1, nil)
	produceMixed(t, a.Addr, "again", 1, 0, 20)
	cfg := mirror.Config{From: a.Addr, To: b.Addr, Selection: selection("again"), Name: "re",
		CommitInterval: 20 * time.Millisecond, ExitWhenCaughtUp: true}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := <-runMirror(t, ctx, cfg); err != nil {
		t.Fatalf("first run: %v", err)
	}
	if _, err := kadm.NewClient(client(t, a.Addr)).DeleteTopic(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, a.Addr, "again", 1, nil)
	produceMixed(t, a.Addr, "again", 1, 0, 60)
	err := <-runMirror(t, ctx, cfg)
	if !errors.Is(err, mirror.ErrSourceTruncated) || !strings.Contains(err.Error(), "recreated") {
		t.Fatalf("mirror of the recreated topic: %v, want ErrSourceTruncated naming the recreation (target holds %d records)", err, len(readCommitted(t, b.Addr, "again")[0]))
	}
	t.Log(err)
}
