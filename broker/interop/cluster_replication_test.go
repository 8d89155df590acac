package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterReplicatedLeaderChase: a topic with replication factor 3 and
// min.insync.replicas 2, an idempotent acks=all producer; the leader is
// killed with SIGKILL three times in a row (each brought back and waited
// for in the ISR). Every acknowledged record is read back from the last
// leader once, at the offset it was acknowledged at: records acknowledged
// by a leader that then died were on its followers.
func TestClusterReplicatedLeaderChase(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("chase")
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	two := "2"
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": &two}, topic)
	cancel()
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	c.waitLeaders(topic, 1, c.ids()...)
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(90*time.Second))
	acked := map[ackedRecord]string{}
	add := func(round map[ackedRecord]string) {
		for k, v := range round {
			if old, dup := acked[k]; dup {
				t.Fatalf("offset %v acknowledged for %q and %q", k, old, v)
			}
			acked[k] = v
		}
	}
	fullISR := func(live int32) partitionView {
		var got partitionView
		eventually(t, 60*time.Second, "all three replicas in the ISR", func() error {
			v, err := c.topicView(live, topic)
			if err != nil {
				return err
			}
			if got = v[0]; len(got.ISR) != 3 || got.Leader < 0 {
				return fmt.Errorf("leader %d ISR %v", got.Leader, got.ISR)
			}
			return nil
		})
		return got
	}
	add(produceNumbered(t, cl, 100, "start"))
	for round := range 3 {
		before := fullISR(c.ids()[0])
		c.brokers[before.Leader].Kill()
		var live []int32
		for _, id := range c.ids() {
			if id != before.Leader {
				live = append(live, id)
			}
		}
		after := c.waitLeaders(topic, 1, live...)[0]
		if after.Epoch <= before.Epoch {
			t.Fatalf("round %d: epoch %d after the kill, %d before", round, after.Epoch, before.Epoch)
		}
		add(produceNumbered(t, cl, 100, fmt.Sprintf("round%d", round)))
		c.brokers[before.Leader].Restart(t)
		c.waitBrokers(c.ids()...)
		fullISR(live[0])
	}
	add(produceNumbered(t, cl, 100, "end"))
	if want := 500; len(acked) != want {
		t.Fatalf("%d records acknowledged, want %d", len(acked), want)
	}
	var last int64 = -1
	for k := range acked {
		last = max(last, k.o)
	}
	if last != int64(len(acked)-1) {
		t.Errorf("acknowledged offsets end at %d for %d records: a gap or an overwrite", last, len(acked))
	}
	checkReadBack(t, c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), acked)
}
