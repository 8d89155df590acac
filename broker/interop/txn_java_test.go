package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/group"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// Main classes of the Kafka 4.1 tools jar used here.
const (
	transactionalCopierClass = "org.apache.kafka.tools.TransactionalMessageCopier"
)

// TestJavaTransactionalProducerAgainstSluice: Kafka 4.1's
// ProducerPerformance with --transactional-id (a transaction every 50 ms,
// monotonic payloads 0..n-1) while franz-go aborts transactions of its own
// into the same partitions; Kafka's console consumer with
// --isolation-level read_committed prints each committed payload once and
// no aborted one, while read_uncommitted shows the aborted records are in
// the log.
func TestJavaTransactionalProducerAgainstSluice(t *testing.T) {
	s := kafka.StartSluice(t)
	const n, aborts, perAbort = 3000, 6, 25
	topic := newTopicName("javatxn")
	createTopic(t, s.Addr, topic, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	aborted := make(chan error, 1)
	go func() {
		aborted <- func() error {
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.TransactionalID(newTopicName("aborter")), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			if err != nil {
				return err
			}
			defer cl.Close()
			for i := 0; i < aborts; i++ {
				if err := cl.BeginTransaction(); err != nil {
					return err
				}
				for j := 0; j < perAbort; j++ {
					if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("aborted-%d-%d", i, j))).FirstErr(); err != nil {
						return err
					}
				}
				if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond) // spread the aborted transactions among the committed ones
			}
			return nil
		}()
	}()
	start := time.Now()
	res, err := kafka.JavaTool(t, ctx, nil, kafka.ProducerPerformanceClass,
		"--topic", topic, "--num-records", strconv.Itoa(n), "--throughput", "-1", "--payload-monotonic",
		"--transactional-id", newTopicName("perf-txn"), "--transaction-duration-ms", "50",
		"--producer-props", "bootstrap.servers="+s.Addr, "acks=all", "batch.size=2048")
	if err != nil {
		t.Fatalf("ProducerPerformance --transactional-id: %v", err)
	}
	t.Logf("ProducerPerformance (%s): %s", time.Since(start).Round(time.Millisecond), lastLine(string(res.Stdout)))
	if err := <-aborted; err != nil {
		t.Fatalf("the aborting franz-go producer: %v", err)
	}

	var want []string
	for i := 0; i < n; i++ {
		want = append(want, strconv.Itoa(i))
	}
	res, err = kafka.JavaTool(t, ctx, nil, kafka.ConsoleConsumerClass,
		"--bootstrap-server", s.Addr, "--topic", topic, "--from-beginning", "--isolation-level", "read_committed",
		"--max-messages", strconv.Itoa(n), "--timeout-ms", "30000")
	if err != nil {
		t.Fatalf("console consumer --isolation-level read_committed: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	assertSameSet(t, got, want)
	// Nothing past the n committed records (the console consumer stops at n).
	assertSameSet(t, readValues(t, s.Addr, topic, kgo.ReadCommitted(), n), want)
	all := readValues(t, s.Addr, topic, kgo.ReadUncommitted(), n+aborts*perAbort)
	if len(all) != n+aborts*perAbort {
		t.Fatalf("read_uncommitted: %d records, want %d committed and %d aborted", len(all), n, aborts*perAbort)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestJavaTransactionalCopierKill9: Kafka's TransactionalMessageCopier
// copies a topic (consume read_committed, produce and send the offsets in
// one transaction of 100, a third of the transactions aborted at random)
// while the sluice broker is killed with SIGKILL and restarted twice and
// one copier is killed with SIGKILL and started again (a zombie fenced;
// in group mode only with SLUICE_TXN_COPIER_KILLS set), in
// the two ways Kafka's transactions system test runs it: "assign", one
// copier per input partition committing offsets under a group id, and
// "group", two copiers subscribed in one consumer group (--group-mode)
// committing with their group metadata (KIP-447, --use-group-metadata). A
// copier that dies (its producer times out while the broker is down) is
// started again under its transactional id and resumes from its committed
// offsets. Then: Kafka's console consumer (read_committed) reads the output
// as exactly the input, each record once; read_uncommitted shows aborted
// records were written (so the check has something to hide).
func TestJavaTransactionalCopierKill9(t *testing.T) {
	// The copiers run on goroutines of their own: check the JVM and the
	// jars here, where a missing one can fail the test.
	if _, err := kafka.Classpath(); err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.JavaPath(); err != nil {
		t.Fatal(err)
	}
	t.Run("assign", func(t *testing.T) { copierKill9(t, false) })
	t.Run("group", func(t *testing.T) { copierKill9(t, true) })
}

func copierKill9(t *testing.T, groupMode bool) {
	s := kafka.StartSluice(t, "--config", groupBrokerConfig(t))
	// SLUICE_TXN_COPIER_RECORDS (per partition) and SLUICE_TXN_COPIER_KILLS
	// make a longer run.
	const partitions = 2
	perPartition, kills := envInt(t, "SLUICE_TXN_COPIER_RECORDS", 1000), envInt(t, "SLUICE_TXN_COPIER_KILLS", 2)
	in, out := newTopicName("copy-in"), newTopicName("copy-out")
	createTopic(t, s.Addr, in, partitions)
	createTopic(t, s.Addr, out, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	var want []string
	func() {
		cl := mustClient(t, s.Addr, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for i := 0; i < perPartition; i++ {
				k, v := fmt.Sprintf("k%d-%d", p, i), fmt.Sprintf("v%d-%d", p, i)
				recs = append(recs, &kgo.Record{Partition: p, Key: []byte(k), Value: []byte(v)})
				want = append(want, k+":"+v)
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("seed the input: %v", err)
		}
	}()

	start := time.Now()
	type copierResult struct {
		p     int
		runs  int
		err   error
		stdio string
	}
	results := make(chan copierResult, partitions)
	var mu sync.Mutex // guards restarts and cancels
	restarts := 0
	cancels := make([]context.CancelFunc, partitions) // of each copier's current run; nil when none runs
	for p := 0; p < partitions; p++ {
		args := []string{"--broker-list", s.Addr, "--transactional-id", fmt.Sprintf("copier-%s-%d", in, p),
			"--input-topic", in, "--input-partition", strconv.Itoa(p), "--output-topic", out,
			"--consumer-group", "copier-" + in, "--transaction-size", "100", "--transaction-timeout", "20000",
			"--enable-random-aborts"}
		if groupMode { // --input-partition is then ignored
			args = append(args, "--group-mode", "--use-group-metadata")
		}
		go func() {
			var err error
			var res kafka.Result
			for run := 1; run <= 5; run++ {
				runCtx, cancel := context.WithCancel(ctx) // cancel: SIGKILL
				mu.Lock()
				cancels[p] = cancel
				mu.Unlock()
				res, err = kafka.JavaTool(t, runCtx, nil, transactionalCopierClass, args...)
				mu.Lock()
				cancels[p] = nil
				mu.Unlock()
				killed := runCtx.Err() != nil
				cancel()
				if err == nil || ctx.Err() != nil {
					results <- copierResult{p, run, err, lastLine(string(res.Stdout))}
					return
				}
				mu.Lock()
				restarts++
				mu.Unlock()
				if killed {
					t.Logf("copier %d (run %d) killed; starting it again", p, run)
				} else {
					t.Logf("copier %d (run %d) failed; starting it again: %v", p, run, firstLines(err.Error(), 3))
				}
			}
			results <- copierResult{p, 5, err, lastLine(string(res.Stdout))}
		}()
	}

	// Kill the broker when the output holds a third, then two thirds, of
	// the input (with 2 kills; counting aborted records too: they are what
	// a crash cuts), and copier 0 when it holds half: its next instance
	// fences it (InitProducerId aborts its open transaction) and goes on
	// from the offsets it committed.
	total := partitions * perPartition
	type event struct {
		at     int
		copier bool
	}
	var events []event
	// In group mode the killed copier's membership lingers for the
	// copier's 10 s session timeout before the group rebalances: that
	// wait is left to the longer runs (SLUICE_TXN_COPIER_KILLS set).
	if !groupMode || os.Getenv("SLUICE_TXN_COPIER_KILLS") != "" {
		events = append(events, event{total / 2, true})
	}
	for kill := 0; kill < kills; kill++ {
		events = append(events, event{total * (kill + 1) / (kills + 1), false})
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at < events[j].at })
	brokerKills, copierKills := 0, 0
	for _, e := range events {
		deadline := time.Now().Add(2 * time.Minute)
		for outputEnd(s.Addr, out) < int64(e.at) {
			if time.Now().After(deadline) {
				t.Fatalf("the copiers wrote fewer than %d records in 2 minutes", e.at)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if e.copier {
			mu.Lock()
			cancel := cancels[0]
			mu.Unlock()
			if cancel == nil {
				t.Logf("copier 0 had finished before the output held %d records: not killed", e.at)
				continue
			}
			cancel()
			copierKills++
			t.Logf("kill -9 of copier 0 at %s with the output at %d+ records", time.Since(start).Round(time.Millisecond), e.at)
			continue
		}
		s.Kill()
		brokerKills++
		t.Logf("kill -9 %d of the broker at %s with the output at %d+ records", brokerKills, time.Since(start).Round(time.Millisecond), e.at)
		time.Sleep(500 * time.Millisecond)
		s.Restart(t)
	}
	for i := 0; i < partitions; i++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("copier %d failed after %d runs: %v", r.p, r.runs, r.err)
		}
		t.Logf("copier %d done after %d run(s): %s", r.p, r.runs, r.stdio)
	}
	t.Logf("copied %d records in %s with %d broker kills, %d copier kills and %d copier restarts", total, time.Since(start).Round(time.Millisecond), brokerKills, copierKills, restarts)

	res, err := kafka.JavaTool(t, ctx, nil, kafka.ConsoleConsumerClass,
		"--bootstrap-server", s.Addr, "--topic", out, "--from-beginning", "--isolation-level", "read_committed",
		"--max-messages", strconv.Itoa(total), "--timeout-ms", "30000",
		"--property", "print.key=true", "--property", "key.separator=:")
	if err != nil {
		t.Fatalf("console consumer --isolation-level read_committed: %v", err)
	}
	assertSameSet(t, strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n"), want)
	committed := readValues(t, s.Addr, out, kgo.ReadCommitted(), total)
	if len(committed) != total {
		t.Fatalf("read_committed: %d records in the output, want %d", len(committed), total)
	}
	all := readValues(t, s.Addr, out, kgo.ReadUncommitted(), total)
	if len(all) <= total {
		t.Fatalf("read_uncommitted: %d records, no aborted one among them (random aborts should leave some)", len(all))
	}
	t.Logf("output: %d committed records (each input record once), %d records in all (aborted included)", total, len(all))
}

// outputEnd is the sum of the topic's end offsets, 0 when the broker does
// not answer.
func outputEnd(addr, topic string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return 0
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			sum += o.Offset
		}
	})
	return sum
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// TestJavaDecodesTransactionState: Kafka's own TransactionLogMessageFormatter
// (kafka-console-consumer --formatter) decodes every record sluice writes to
// __transaction_state, on the partition Kafka's hash puts the id on, and the
// states it reads follow the coordinator's state machine through a commit,
// an abort and a commit: Empty, Ongoing, PrepareCommit (holding the
// partitions), CompleteCommit (holding none), Ongoing, PrepareAbort,
// CompleteAbort, Ongoing, PrepareCommit, CompleteCommit.
func TestJavaDecodesTransactionState(t *testing.T) {
	s := kafka.StartSluice(t)
	topic := newTopicName("txstate")
	createTopic(t, s.Addr, topic, 2)
	id := newTopicName("txstate-id")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := mustClient(t, s.Addr, kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, commit := range []bool{true, false, true} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	p := group.PartitionFor(id, 50)
	n := endOffsets(t, s.Addr, "__transaction_state")[p]
	if n == 0 {
		t.Fatalf("__transaction_state partition %d (Kafka's hash of %q) is empty", p, id)
	}
	res, err := kafka.JavaTool(t, ctx, nil, kafka.ConsoleConsumerClass,
		"--bootstrap-server", s.Addr, "--topic", "__transaction_state", "--partition", strconv.Itoa(int(p)), "--offset", "earliest",
		"--max-messages", strconv.FormatInt(n, 10), "--timeout-ms", "30000",
		"--formatter", "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter")
	if err != nil {
		t.Fatalf("console consumer with TransactionLogMessageFormatter: %v", err)
	}
	type partitions []struct {
		Topic        string  `json:"topic"`
		PartitionIDs []int32 `json:"partitionIds"`
	}
	type entry struct {
		Key struct {
			Data struct {
				TransactionalID string `json:"transactionalId"`
			} `json:"data"`
		} `json:"key"`
		Value *struct {
			Data struct {
				ProducerID int64      `json:"producerId"`
				Status     int        `json:"transactionStatus"`
				Partitions partitions `json:"transactionPartitions"`
			} `json:"data"`
		} `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(res.Stdout)) // the formatter writes the records back to back
	var statuses []int
	for {
		var e entry
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding the formatter's output: %v\n%s", err, res.Stdout)
		}
		if e.Key.Data.TransactionalID != id || e.Value == nil {
			t.Fatalf("record %+v: want %s's state", e, id)
		}
		st := e.Value.Data.Status
		switch {
		case st == 2 || st == 3: // Prepare*: the transaction's partitions
			if len(e.Value.Data.Partitions) != 1 || e.Value.Data.Partitions[0].Topic != topic || len(e.Value.Data.Partitions[0].PartitionIDs) != 2 {
				t.Fatalf("status %d holds partitions %+v, want %s [0 1]", st, e.Value.Data.Partitions, topic)
			}
		case st == 0 || st == 4 || st == 5:
			if len(e.Value.Data.Partitions) != 0 {
				t.Fatalf("status %d holds partitions %+v, want none", st, e.Value.Data.Partitions)
			}
		}
		if len(statuses) == 0 || statuses[len(statuses)-1] != st { // Ongoing repeats as partitions are added
			statuses = append(statuses, st)
		}
	}
	want := []int{0, 1, 2, 4, 1, 3, 5, 1, 2, 4}
	if fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Fatalf("states read by Kafka's formatter %v, want %v (0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort)", statuses, want)
	}
	t.Logf("Kafka's formatter decoded %d records of %s on partition %d: states %v", n, id, p, statuses)
}
