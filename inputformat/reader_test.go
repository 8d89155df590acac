package inputformat_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

func TestMain(m *testing.M) { os.Exit(kafka.Main(m)) }

func client(t *testing.T, addr string, extra ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr)}, inputformat.ClientOptions()...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v %v", topic, err, resp.Err)
	}
}

// readAll reads a split to its end and returns the offsets and values seen.
func readAll(t *testing.T, ctx context.Context, cl *kgo.Client, s inputformat.Split, readCommitted bool) ([]int64, []string, int64, error) {
	t.Helper()
	rd, err := inputformat.NewReader(cl, s, inputformat.ReaderOptions{ReadCommitted: readCommitted, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	var vals []string
	for {
		recs, done, err := rd.Next(ctx)
		if err != nil {
			return offs, vals, rd.Reached(), err
		}
		for _, r := range recs {
			offs = append(offs, r.Offset)
			vals = append(vals, string(r.Value))
		}
		if done {
			return offs, vals, rd.Reached(), nil
		}
	}
}

// Compressed multi-record batches: a split starting and ending inside
// batches returns exactly its offsets, and reaches its end.
func TestReaderBatchBoundsOnSluice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	cl := client(t, b.Addr, kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, ctx, cl, "bounds", 1)
	const n = 1000
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "bounds", Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	parts, err := inputformat.ListOffsets(ctx, kadm.NewClient(cl), []string{"bounds"}, true)
	if err != nil || len(parts) != 1 || parts[0].End != n || parts[0].LogStart != 0 {
		t.Fatalf("offsets %+v %v", parts, err)
	}
	for _, r := range [][2]int64{{0, n}, {37, 512}, {999, 1000}, {0, 1}, {250, 251}, {400, 400}} {
		s := inputformat.Split{Topic: "bounds", Partition: 0, Start: r[0], End: r[1]}
		offs, vals, reached, err := readAll(t, ctx, cl, s, true)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if reached != s.End || int64(len(offs)) != s.Len() {
			t.Fatalf("%s: reached %d, %d records", s, reached, len(offs))
		}
		for i, o := range offs {
			if o != s.Start+int64(i) || vals[i] != fmt.Sprintf("v%d", o) {
				t.Fatalf("%s: record %d is offset %d value %q", s, i, o, vals[i])
			}
		}
	}
	// A split beyond the log end is a truncated log, not a wait forever.
	_, _, _, err = readAll(t, ctx, cl, inputformat.Split{Topic: "bounds", Start: n + 5, End: n + 10}, true)
	if !errors.Is(err, inputformat.ErrTruncated) {
		t.Fatalf("beyond the end: %v", err)
	}
}

// Transactions on Apache Kafka: planning stops at the last stable offset
// (never inside an open transaction); read_committed skips aborted records
// and control records and still reaches the split's end.
func TestReaderTransactionsOnKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := kafka.SharedKafka(t)
	adm := client(t, k.Addr)
	createTopic(t, ctx, adm, "txn", 1)
	tx := client(t, k.Addr, kgo.TransactionalID("sluice-reader-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := func(prefix string, n int, commit bool) {
		t.Helper()
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "txn", Value: []byte(fmt.Sprintf("%s%d", prefix, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		end := kgo.TryAbort
		if commit {
			end = kgo.TryCommit
		}
		if err := tx.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	txn("a", 10, true)  // offsets 0-9, marker 10
	txn("x", 10, false) // offsets 11-20 aborted, marker 21
	txn("b", 10, true)  // offsets 22-31, marker 32
	// An open transaction: the plan must stop before it.
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Topic: "txn", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer tx.EndTransaction(context.Background(), kgo.TryAbort)

	parts, err := inputformat.ListOffsets(ctx, kadm.NewClient(adm), []string{"txn"}, true)
	if err != nil || len(parts) != 1 {
		t.Fatal(parts, err)
	}
	if parts[0].End != 33 {
		t.Fatalf("read-committed end %d, want the last stable offset 33", parts[0].End)
	}
	_, vals, reached, err := readAll(t, ctx, adm, inputformat.Split{Topic: "txn", Start: 0, End: 33}, true)
	if err != nil || reached != 33 || len(vals) != 20 {
		t.Fatalf("read committed: %d values %v, reached %d, %v", len(vals), vals, reached, err)
	}
	for i, v := range vals {
		want := fmt.Sprintf("a%d", i)
		if i >= 10 {
			want = fmt.Sprintf("b%d", i-10)
		}
		if v != want {
			t.Fatalf("value %d = %q, want %q", i, v, want)
		}
	}
	// A split ending inside the aborted transaction.
	offs, _, reached, err := readAll(t, ctx, adm, inputformat.Split{Topic: "txn", Start: 5, End: 15}, true)
	if err != nil || reached != 15 || len(offs) != 5 || offs[0] != 5 || offs[4] != 9 {
		t.Fatalf("[5,15): %v reached %d %v", offs, reached, err)
	}
	// A split made only of the aborted records and markers.
	offs, _, reached, err = readAll(t, ctx, adm, inputformat.Split{Topic: "txn", Start: 10, End: 22}, true)
	if err != nil || reached != 22 || len(offs) != 0 {
		t.Fatalf("[10,22): %v reached %d %v", offs, reached, err)
	}
	// read_uncommitted sees the aborted records (but no markers).
	_, vals, reached, err = readAll(t, ctx, adm, inputformat.Split{Topic: "txn", Start: 0, End: 33}, false)
	if err != nil || reached != 33 || len(vals) != 30 {
		t.Fatalf("read uncommitted: %d values, reached %d, %v", len(vals), reached, err)
	}
}

// Records deleted before they were read: the reader says so, never resets.
func TestReaderOutOfRangeOnKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := kafka.SharedKafka(t)
	cl := client(t, k.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, ctx, cl, "deleted", 1)
	var recs []*kgo.Record
	for i := 0; i < 100; i++ {
		recs = append(recs, &kgo.Record{Topic: "deleted", Value: []byte{byte(i)}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: "deleted", Partition: 0, At: 50})
	if _, err := adm.DeleteRecords(ctx, o); err != nil {
		t.Fatal(err)
	}
	parts, err := inputformat.ListOffsets(ctx, adm, []string{"deleted"}, true)
	if err != nil || parts[0].LogStart != 50 {
		t.Fatalf("%+v %v", parts, err)
	}
	_, _, _, err = readAll(t, ctx, cl, inputformat.Split{Topic: "deleted", Start: 10, End: 100}, true)
	if !errors.Is(err, inputformat.ErrOutOfRange) {
		t.Fatalf("got %v", err)
	}
	offs, _, reached, err := readAll(t, ctx, cl, inputformat.Split{Topic: "deleted", Start: 50, End: 100}, true)
	if err != nil || reached != 100 || len(offs) != 50 {
		t.Fatalf("%d records reached %d %v", len(offs), reached, err)
	}
	if _, err := inputformat.ListOffsets(ctx, adm, []string{"no-such-topic"}, true); !errors.Is(err, inputformat.ErrNoTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
}
