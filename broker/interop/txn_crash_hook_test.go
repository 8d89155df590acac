//go:build !sluice_mutation

package interop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/server"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestCrashHookIgnoredWithoutTheMutationTag: a sluice binary built
// without the sluice_mutation tag (kafka.SluiceBinary under make test's
// tags) does not read server.CrashAfterMarkersEnv. Armed to kill the
// process before its first transaction marker, the broker commits a
// transaction (read_committed sees its record, so the marker was written)
// and logs no armed hook. A tagged binary dies there
// (TestSluiceKill9BetweenPrepareAndComplete).
func TestCrashHookIgnoredWithoutTheMutationTag(t *testing.T) {
	t.Setenv(server.CrashAfterMarkersEnv, "0")
	s := kafka.StartSluice(t)
	topic := newTopicName("txhook")
	createTopic(t, s.Addr, topic, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := mustClient(t, s.Addr, kgo.TransactionalID(newTopicName("txhook-id")), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RetryTimeout(10*time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("EndTxn with the hook set on an untagged binary: %v\n%s", err, tailOf(s.Output(), 3000))
	}
	assertSameSet(t, readValues(t, s.Addr, topic, kgo.ReadCommitted(), 1), []string{"committed"})
	if err := s.ExitError(); err != nil {
		t.Fatalf("the broker exited: %v\n%s", err, tailOf(s.Output(), 3000))
	}
	if out := s.Output(); strings.Contains(out, "test hook armed") || strings.Contains(out, server.CrashAfterMarkersEnv) {
		t.Fatalf("an untagged binary read %s:\n%s", server.CrashAfterMarkersEnv, tailOf(out, 3000))
	}
}
