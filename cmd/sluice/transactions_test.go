package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// runSplit runs a sluice command in-process, stdout and stderr apart;
// a command still running after a minute is cancelled and fails (a consume
// with --exit-at-end that never sees its end).
func runSplit(args ...string) (stdout, stderr string, err error) {
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// cancelOnWrite is a writer that calls cancel at its first write.
type cancelOnWrite context.CancelFunc

func (c cancelOnWrite) Write(p []byte) (int, error) {
	c()
	return len(p), nil
}

// txnFixture is a broker with topic "tx" (2 partitions) holding, from
// transactional id "tx-done", a committed, an aborted and a committed
// transaction of 3 records each, then an open transaction of 3 records
// from "tx-open" (left open). It returns the broker's address and the
// committed and all values.
func txnFixture(t *testing.T) (addr string, committed, all []string) {
	t.Helper()
	addr = sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 2, 1, nil, "tx"); err != nil {
		t.Fatal(err)
	}
	producer := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic("tx"),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	txn := func(cl *kgo.Client, prefix string, end *kgo.TransactionEndTry) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			all = append(all, v)
			if end != nil && *end == kgo.TryCommit {
				committed = append(committed, v)
			}
		}
		if end != nil {
			if err := cl.EndTransaction(ctx, *end); err != nil {
				t.Fatalf("end %s: %v", prefix, err)
			}
		}
	}
	commit, abort := kgo.TryCommit, kgo.TryAbort
	done := producer("tx-done")
	txn(done, "c1", &commit)
	txn(done, "a1", &abort)
	txn(done, "c2", &commit)
	txn(producer("tx-open"), "open", nil)
	sort.Strings(committed)
	sort.Strings(all)
	return addr, committed, all
}

func sortedLines(s string) []string {
	lines := strings.Fields(s)
	sort.Strings(lines)
	return lines
}

// TestTransactionsAndIsolationCommands: `sluice transactions list|describe`
// (table and --json) show the coordinator's view of an open and an ended
// transactional id; `sluice consume --isolation read_committed -e` prints
// exactly the committed records and stops at the last stable offset,
// read_uncommitted prints every record (markers are never printed).
func TestTransactionsAndIsolationCommands(t *testing.T) {
	addr, committed, all := txnFixture(t)

	out, _, err := runSplit("transactions", "list", "--bootstrap", addr)
	if err != nil {
		t.Fatalf("transactions list: %v", err)
	}
	for _, want := range []string{"TRANSACTIONAL ID", "tx-done", "CompleteCommit", "tx-open", "Ongoing"} {
		if !strings.Contains(out, want) {
			t.Errorf("transactions list: no %q in\n%s", want, out)
		}
	}
	out, _, err = runSplit("transactions", "list", "--bootstrap", addr, "--state", "ongoing", "--json")
	if err != nil {
		t.Fatalf("transactions list --state ongoing --json: %v", err)
	}
	var listed []kafka.Transaction
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(listed) != 1 || listed[0].TransactionalID != "tx-open" || listed[0].State != "Ongoing" || listed[0].ProducerID < 0 {
		t.Errorf("list --state ongoing: %+v, want only tx-open, Ongoing", listed)
	}
	if _, _, err := runSplit("transactions", "list", "--bootstrap", addr, "--state", "halfway"); err == nil || !strings.Contains(err.Error(), `"halfway" is not a transaction state`) {
		t.Errorf("list --state halfway: %v", err)
	}

	out, _, err = runSplit("transactions", "describe", "--bootstrap", addr, "--json", "tx-open", "tx-done")
	if err != nil {
		t.Fatalf("transactions describe --json: %v", err)
	}
	var described []kafka.Transaction
	if err := json.Unmarshal([]byte(out), &described); err != nil {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	if len(described) != 2 {
		t.Fatalf("describe: %d transactions\n%s", len(described), out)
	}
	open, ended := described[0], described[1]
	if open.State != "Ongoing" || len(open.Partitions) != 1 || open.Partitions[0].Topic != "tx" || len(open.Partitions[0].Partitions) != 2 ||
		open.TimeoutMs <= 0 || open.StartMs <= 0 || open.ProducerEpoch < 0 {
		t.Errorf("describe tx-open: %+v", open)
	}
	if ended.State != "CompleteCommit" || len(ended.Partitions) != 0 {
		t.Errorf("describe tx-done: %+v", ended)
	}
	out, _, err = runSplit("transactions", "describe", "--bootstrap", addr, "tx-open", "nobody")
	if err == nil || !strings.Contains(err.Error(), `"nobody"`) || !strings.Contains(out, "tx[0 1]") || !strings.Contains(out, "EPOCH") {
		t.Errorf("describe tx-open nobody: %v\n%s", err, out)
	}

	for _, c := range []struct {
		isolation string
		want      []string
	}{{"read_committed", committed}, {"read_uncommitted", all}} {
		out, errOut, err := runSplit("consume", "--bootstrap", addr, "-t", "tx", "-e", "--isolation", c.isolation)
		if err != nil {
			t.Fatalf("consume --isolation %s: %v\n%s", c.isolation, err, errOut)
		}
		if got := sortedLines(out); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("consume --isolation %s -e: %v, want %v", c.isolation, got, c.want)
		}
		if want := fmt.Sprintf("consumed %d records", len(c.want)); !strings.Contains(errOut, want) {
			t.Errorf("consume --isolation %s: stderr %q, want %q", c.isolation, errOut, want)
		}
	}
	if _, _, err := runSplit("consume", "--bootstrap", addr, "-t", "tx", "--isolation", "serializable"); err == nil || !strings.Contains(err.Error(), `"serializable"`) {
		t.Errorf("consume --isolation serializable: %v", err)
	}
}

// TestBenchProduceTransactional: `sluice bench produce --transactional-id`
// sends its records in transactions of --txn-records, all committed:
// read_committed reads every one, and the coordinator shows the id
// CompleteCommit.
func TestBenchProduceTransactional(t *testing.T) {
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	out, errOut, err := runSplit("bench", "produce", "--bootstrap", addr, "-t", "benchtx", "--partitions", "2", "--records", "2500",
		"--record-size", "50", "--transactional-id", "bench-tx", "--txn-records", "1000", "--report-interval", "200ms")
	if err != nil {
		t.Fatalf("bench produce --transactional-id: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "2500 records sent, ") || !strings.Contains(out, "3 transactions of up to 1000 records committed.") {
		t.Errorf("bench produce output:\n%s", out)
	}
	t.Logf("%s%s", errOut, out)
	_, errOut, err = runSplit("consume", "--bootstrap", addr, "-t", "benchtx", "-e", "--isolation", "read_committed", "-f", "%o\\n")
	if err != nil || !strings.Contains(errOut, "consumed 2500 records") {
		t.Errorf("consume read_committed after the benchmark: %v\n%s", err, errOut)
	}
	out, _, err = runSplit("transactions", "describe", "--bootstrap", addr, "bench-tx")
	if err != nil || !strings.Contains(out, "CompleteCommit") {
		t.Errorf("describe bench-tx: %v\n%s", err, out)
	}
	// Interrupted (SIGINT cancels the command's context): the open
	// transaction is aborted, not left to time out; read_committed sees
	// whole transactions only.
	root := newRootCommand()
	root.SetArgs([]string{"bench", "produce", "--bootstrap", addr, "-t", "benchint", "--partitions", "1", "--records", "5000000",
		"--record-size", "10", "--transactional-id", "bench-int", "--txn-records", "1000", "--report-interval", "100ms"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(cancelOnWrite(cancel)) // interrupted at its first progress line
	if err := root.ExecuteContext(ctx); err == nil {
		t.Fatal("bench produce of 5,000,000 records not interrupted")
	}
	out, _, err = runSplit("transactions", "describe", "--bootstrap", addr, "--json", "bench-int")
	var d []kafka.Transaction
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || len(d) != 1 || (d[0].State != "CompleteAbort" && d[0].State != "CompleteCommit") {
		t.Fatalf("after the interrupted benchmark: %v %s", err, out)
	}
	_, errOut, err = runSplit("consume", "--bootstrap", addr, "-t", "benchint", "-e", "--isolation", "read_committed", "-f", "%o\\n")
	var n int
	if err != nil || func() error { _, e := fmt.Sscanf(errOut, "consumed %d records", &n); return e }() != nil || n%1000 != 0 {
		t.Errorf("read_committed after the interrupted benchmark: %v, %q (want whole transactions of 1000)", err, errOut)
	}
	t.Logf("interrupted benchmark: %d records in committed transactions, last transaction %s", n, d[0].State)
	if _, _, err := runSplit("bench", "produce", "--bootstrap", addr, "--txn-records", "10"); err == nil || !strings.Contains(err.Error(), "--txn-records needs --transactional-id") {
		t.Errorf("--txn-records without --transactional-id: %v", err)
	}
	if _, _, err := runSplit("bench", "produce", "--bootstrap", addr, "--transactional-id", "x", "--acks", "1"); err == nil || !strings.Contains(err.Error(), "--acks all") {
		t.Errorf("--transactional-id with --acks 1: %v", err)
	}
}
