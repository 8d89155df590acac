package jobs_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// txnLoadFixture fills topic "txload" (3 partitions) of a sluice broker
// with two franz-go transactional producers whose transactions interleave
// (A's records sit between B's in every partition): 6 rounds, each with a
// transaction of 12 records from A and from B; A commits in the even
// rounds and aborts in the odd ones, B aborts every third round; plus 9
// plain (non-transactional) records. No transaction is left open. It
// returns each record's "p/txn/n" key, committed (or plain) and all.
func txnLoadFixture(t *testing.T, ctx context.Context, addr string) (committed, all []string) {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 3, 1, nil, "txload"); err != nil {
		t.Fatal(err)
	}
	newProducer := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("txload"),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	a, b := newProducer(kgo.TransactionalID("load-a")), newProducer(kgo.TransactionalID("load-b"))
	plain := newProducer()
	produce := func(cl *kgo.Client, p string, txn, n int, visible bool) {
		key := fmt.Sprintf("%s/%d/%d", p, txn, n)
		v := fmt.Sprintf(`{"p": %q, "txn": %d, "n": %d}`, p, txn, n)
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", key, err)
		}
		all = append(all, key)
		if visible {
			committed = append(committed, key)
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction: %v", err)
		}
	}
	for round := 0; round < 6; round++ {
		commitA, commitB := round%2 == 0, round%3 != 2
		if err := a.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := b.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 12; n++ {
			produce(a, "A", round, n, commitA)
			produce(b, "B", round, n, commitB)
		}
		if round%2 == 0 {
			produce(plain, "plain", round, 0, true)
			produce(plain, "plain", round, 1, true)
			produce(plain, "plain", round, 2, true)
		}
		end(a, commitA)
		end(b, commitB)
	}
	sort.Strings(committed)
	sort.Strings(all)
	return committed, all
}

// loadedKeys reads the "p/txn/n" of every row of a warehouse's Parquet
// files with DuckDB (the independent reader), sorted, duplicates kept.
func loadedKeys(t *testing.T, dir string) []string {
	t.Helper()
	rows, err := duck(t).Query(fmt.Sprintf(`SELECT p || '/' || txn || '/' || n FROM read_parquet('%s') ORDER BY 1`, filepath.Join(dir, "*.parquet")))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestLoadRunIsolation: `sluice load run` (the built binary) over a sluice
// topic holding committed, aborted and plain records of interleaved
// transactions loads, with isolation: read_committed, exactly the committed
// and plain records, each once; with read_uncommitted every record once.
// Tasks of 25 records split the partitions inside transactions, so task
// boundaries fall on aborted ranges and on markers.
func TestLoadRunIsolation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	committed, all := txnLoadFixture(t, ctx, b.Addr)
	if len(committed) == len(all) || len(committed) == 0 {
		t.Fatalf("fixture: %d committed of %d", len(committed), len(all))
	}
	for _, c := range []struct {
		isolation string
		want      []string
	}{{"read_committed", committed}, {"read_uncommitted", all}} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		_, spec := writeJob(t, dir, fmt.Sprintf(`
name: txload-%s
source: {bootstrap: [%s], topics: [txload], isolation: %s, max_records_per_task: 25}
decode: {format: json}
partition: {by: none}
output: {uri: %s, format: parquet, metadata_columns: true}
`, strings.ReplaceAll(c.isolation, "_", "-"), b.Addr, c.isolation, out))
		cmd := exec.CommandContext(ctx, kafka.SluiceBinary(t), "load", "run", "--quiet", spec)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sluice load run (%s): %v\n%s", c.isolation, err, msg)
		}
		var dups int
		if err := duck(t).QueryRow(fmt.Sprintf(`SELECT count(*) FROM (SELECT _partition, _offset FROM read_parquet('%s') GROUP BY 1, 2 HAVING count(*) > 1)`,
			filepath.Join(out, "*.parquet"))).Scan(&dups); err != nil || dups != 0 {
			t.Errorf("isolation %s: %d (_partition, _offset) pairs loaded more than once (%v)", c.isolation, dups, err)
		}
		got := loadedKeys(t, out)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("isolation %s: loaded %d rows, want %d\n got %v\nwant %v", c.isolation, len(got), len(c.want), got, c.want)
		}
		t.Logf("isolation %s: %d rows loaded (of %d produced)", c.isolation, len(got), len(all))
	}
}
