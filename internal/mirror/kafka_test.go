package mirror_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mirror"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// mirrorOnce runs a mirror until it has caught up with the source.
func mirrorOnce(t *testing.T, from, to, topics, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := mirror.New(mirror.Config{From: from, To: to, Selection: selection(topics), Name: name,
		CommitInterval: 50 * time.Millisecond, CheckpointInterval: 200 * time.Millisecond, ExitWhenCaughtUp: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(ctx); err != nil {
		t.Fatalf("mirror %s → %s: %v", from, to, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("mirror %s → %s did not catch up in 60 s", from, to)
	}
}

// TestMirrorKafkaToSluiceAndBack mirrors a topic from Apache Kafka 4.1 to
// sluice (an aborted Kafka transaction on the source, sluice's
// transactions on the target), then a sluice topic to Kafka (sluice's
// read_committed fetch on the source, Kafka's transaction coordinator and
// the checkpoint topic on the target), compares each record by record, and
// reads `mirror status` from Kafka: no lag, a checkpoint.
func TestMirrorKafkaSluice(t *testing.T) {
	k := kafka.SharedKafka(t)
	s := sluice.StartBroker(t, sluice.BrokerOptions{})
	topic := fmt.Sprintf("kmirror-%d", time.Now().UnixNano())
	createTopic(t, k.Addr, topic, 3, map[string]*string{"retention.ms": strp("7200000")})
	produceMixed(t, k.Addr, topic, 3, 0, 200)

	mirrorOnce(t, k.Addr, s.Addr, topic, "k2s")
	fromKafka, onSluice := readCommitted(t, k.Addr, topic), readCommitted(t, s.Addr, topic)
	sameRecords(t, topic, fromKafka, onSluice)

	// sluice → Kafka: a topic that lives only on sluice (the mirror keeps
	// topic names, so the copy above cannot go back to the same broker).
	back := topic + "-back"
	createTopic(t, s.Addr, back, 2, map[string]*string{"retention.ms": strp("5400000")})
	produceMixed(t, s.Addr, back, 2, 0, 200)
	mirrorOnce(t, s.Addr, k.Addr, back, "s2k-"+topic)
	sameRecords(t, back, readCommitted(t, s.Addr, back), readCommitted(t, k.Addr, back))

	st, err := mirror.Status(context.Background(), mirror.StatusOptions{From: s.Addr, To: k.Addr, Name: "s2k-" + topic})
	if err != nil {
		t.Fatalf("status on Kafka: %v", err)
	}
	for _, ps := range st {
		if ps.Lag != 0 || ps.Checkpoint == nil {
			t.Fatalf("status after catching up: %+v", ps)
		}
	}
}
