package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/server"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestSluiceKill9BetweenPrepareAndComplete: a transaction over 8
// partitions, with offsets of a group committed in it (TxnOffsetCommit), is
// ended while the broker process carries the test hook
// server.CrashAfterMarkersEnv (a binary built with the sluice_mutation tag,
// kafka.MutationSluiceBinary), so the process SIGKILLs itself after its
// PrepareCommit (or PrepareAbort) record and k of the 9 markers (k = 0, 3,
// 7; every k for both outcomes with SLUICE_TXN_CRASH_ALL=1; the first
// marker goes to __consumer_offsets). On restart the coordinator
// completes the transaction before it listens: every partition holds the
// outcome's marker (its last stable offset is its end: the 8 records, the
// marker, and on the partitions marked before the crash that marker
// again), the group's offsets are those of a commit and absent after an
// abort, read_committed sees all 64 records of a commit and none of an
// abort, read_uncommitted all 64, the transaction is
// CompleteCommit/CompleteAbort, and the same transactional id then commits
// a new transaction.
func TestSluiceKill9BetweenPrepareAndComplete(t *testing.T) {
	const partitions, perPartition = 8, 8
	type crashCase struct {
		commit  bool
		markers int
	}
	cases := []crashCase{{true, 0}, {true, 3}, {false, 7}}
	if os.Getenv("SLUICE_TXN_CRASH_ALL") != "" { // every k of the 9 markers, both outcomes
		cases = nil
		for _, commit := range []bool{true, false} {
			for k := 0; k <= partitions; k++ {
				cases = append(cases, crashCase{commit, k})
			}
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("commit=%v/markers=%d", c.commit, c.markers), func(t *testing.T) {
			t.Setenv(server.CrashAfterMarkersEnv, fmt.Sprint(c.markers))
			s := kafka.StartSluiceBinary(t, kafka.MutationSluiceBinary(t))
			os.Setenv(server.CrashAfterMarkersEnv, "") // the restart runs without the hook; t.Setenv restores it at the end
			topic := newTopicName("txcrash")
			createTopic(t, s.Addr, topic, partitions)
			id := newTopicName("txcrash-id")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(0), kgo.RetryTimeout(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			var values []string
			for p := int32(0); p < partitions; p++ {
				for i := 0; i < perPartition; i++ {
					v := fmt.Sprintf("p%d-r%d", p, i)
					values = append(values, v)
					if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
						t.Fatalf("produce %s: %v", v, err)
					}
				}
			}
			// The transaction also commits offsets of a group (their
			// marker goes to __consumer_offsets, the first partition in
			// the coordinator's order).
			group := id + "-group"
			txnCommitOffsets(t, ctx, cl, id, group, topic, partitions)
			endCtx, endCancel := context.WithTimeout(ctx, 10*time.Second)
			endErr := cl.EndTransaction(endCtx, kgo.TransactionEndTry(c.commit))
			endCancel()
			waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
			exit := s.WaitContext(waitCtx)
			waitCancel()
			var ee *exec.ExitError
			if !errors.As(exit, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the broker did not die by SIGKILL at marker %d (exit: %v; EndTxn: %v)\n%s", c.markers+1, exit, endErr, tailOf(s.Output(), 3000))
			}
			t.Logf("EndTxn answered %v; the broker killed itself before marker %d", endErr, c.markers+1)
			cl.Close()

			s.Restart(t)
			if out := s.Output(); !strings.Contains(out, "completing a transaction found half ended") || !strings.Contains(out, id) {
				t.Fatalf("the restarted broker did not log completing %s:\n%s", id, tailOf(out, 3000))
			}
			adm := kadm.NewClient(mustClient(t, s.Addr))
			described, err := adm.DescribeTransactions(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := described[id]
			want := "CompleteAbort"
			if c.commit {
				want = "CompleteCommit"
			}
			if !ok || d.State != want || len(d.Topics) != 0 {
				t.Fatalf("after the restart %s is %+v, want %s with no partitions", id, d, want)
			}
			offs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < partitions; p++ {
				o, ok := offs.Lookup(topic, p)
				switch {
				case c.commit && (!ok || o.Err != nil || o.At != int64(100+p)):
					t.Fatalf("group %s after the restart: offset of partition %d %+v (found %v), want %d committed with the transaction", group, p, o, ok, 100+p)
				case !c.commit && ok && o.At >= 0:
					t.Fatalf("group %s after the restart: offset of partition %d is %d from an aborted transaction", group, p, o.At)
				}
			}
			stable := listOffsets(t, s.Addr, topic, partitions, 1)
			ends := listOffsets(t, s.Addr, topic, partitions, 0)
			for p := int32(0); p < partitions; p++ {
				// The coordinator writes markers in partition order; those
				// written before the crash are written again at restart (a
				// second marker of a producer closes nothing).
				want := int64(perPartition + 1)
				if int(p)+1 < c.markers { // marker 1 went to __consumer_offsets
					want++
				}
				if ends[p] != want || stable[p] != ends[p] {
					t.Fatalf("partition %d: end %d, last stable offset %d; want both %d (the records, a marker before the crash if k > %d, one after)", p, ends[p], stable[p], want, p)
				}
			}
			all := readValues(t, s.Addr, topic, kgo.ReadUncommitted(), len(values))
			assertSameSet(t, all, values)
			committed := readValues(t, s.Addr, topic, kgo.ReadCommitted(), 0)
			if c.commit {
				assertSameSet(t, committed, values)
			} else if len(committed) != 0 {
				t.Fatalf("read_committed saw %d records of an aborted transaction: %v", len(committed), committed[:min(5, len(committed))])
			}

			// The producer comes back and commits.
			cl2, err := kgo.NewClient(kgo.SeedBrokers(s.Addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl2.Close()
			if err := cl2.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl2.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("after")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := cl2.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			if c.commit {
				committed = append(values, "after")
			} else {
				committed = []string{"after"}
			}
			assertSameSet(t, readValues(t, s.Addr, topic, kgo.ReadCommitted(), len(committed)), committed)
		})
	}
}

func mustClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// listOffsets returns each partition's latest offset at an isolation level
// (0 read_uncommitted: the end; 1 read_committed: the last stable offset).
func listOffsets(t *testing.T, addr, topic string, partitions int32, isolation int8) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < partitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, mustClient(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("list offsets %s[%d] isolation %d: code %d", topic, rp.Partition, isolation, rp.ErrorCode)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	return out
}

// readValues consumes topic from the start at an isolation level until
// want values arrived and then no more come for a second (read_committed
// must not show more than it should); fails after 60 s.
func readValues(t *testing.T, addr, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := mustClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	var out []string
	deadline := time.Now().Add(60 * time.Second)
	quiet := 0
	for len(out) < want || quiet < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d records of %s in 60 s", len(out), want, topic)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)); n++ })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
			}
		}
		if n == 0 && len(out) >= want {
			quiet++
		}
	}
	return out
}

// txnCommitOffsets adds group's offsets (100+p for each partition of topic)
// to the producer's ongoing transaction: AddOffsetsToTxn, then
// TxnOffsetCommit, as a Java producer's sendOffsetsToTransaction does.
func txnCommitOffsets(t *testing.T, ctx context.Context, cl *kgo.Client, id, group, topic string, partitions int32) {
	t.Helper()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = id, pid, epoch, group
	addResp, err := add.RequestWith(ctx, cl)
	if err != nil || addResp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v, code %d", err, addResp.ErrorCode)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = id, group, pid, epoch, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = topic
	for p := int32(0); p < partitions; p++ {
		cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch = p, int64(100+p), -1
		ct.Partitions = append(ct.Partitions, cp)
	}
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("TxnOffsetCommit %s[%d]: code %d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
		}
	}
}
