package interop

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterReassignThrottle: a partition holding throttleMiB MiB gains a
// replica on broker 3 through `sluice topics reassign --throttle R`. The
// new replica catches up no faster than the throttle allows (bytes moved
// over the move's duration at most R·(1+slack)), while clients are not
// throttled: a consumer reads the whole partition from the leader, and an
// acks=all producer writes to it, each at more than twice R during the
// move. While moving, the topic carries Kafka's throttled-replica lists
// (the current replicas on the leader side, the added one on the follower
// side); --verify, once the move completed, removes them and the brokers'
// rates.
func TestClusterReassignThrottle(t *testing.T) {
	const (
		throttleMiB = 8
		rate        = 1 << 20 // bytes/s
		slack       = 0.25
		valueSize   = 16 << 10
	)
	c := startBrokerCluster(t, 3)
	topic := newTopicName("throttled")
	createAssigned(t, c, topic, [][]int32{{1, 2}}, map[string]string{"min.insync.replicas": "2"})
	c.fullISR(topic, 1, 1, 1, 2)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	produce := func(n int) {
		t.Helper()
		rs := make([]*kgo.Record, n)
		for i := range rs {
			value := make([]byte, valueSize) // random: the bytes moved are the bytes written
			_, _ = rand.Read(value)
			rs[i] = &kgo.Record{Topic: topic, Partition: 0, Value: value}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	records := throttleMiB << 20 / valueSize
	produce(records)
	ends := c.endOffsets(topic)
	if ends[0] != int64(records) {
		t.Fatalf("end offset %d after %d records", ends[0], records)
	}

	bootstrap := strings.Join(c.bootstrap(), ",")
	reassign := func(args ...string) (string, error) {
		out, errOut, err := sluiceCLI(t, ctx, "", append([]string{"topics", "reassign", "--bootstrap", bootstrap, "--topic", topic, "--partition", "0", "--replicas", "1,2,3"}, args...)...)
		t.Logf("sluice topics reassign %v: %v\n%s%s", args, err, out, errOut)
		return out + errOut, err
	}
	start := time.Now()
	if out, err := reassign("--throttle", fmt.Sprint(rate)); err != nil || !strings.Contains(out, "replication throttled to") {
		t.Fatalf("reassign --throttle: %v\n%s", err, out)
	}
	adm := kadm.NewClient(c.client())
	lists := func() (leader, follower string) {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range rc.Configs {
			switch cfg.Key {
			case "leader.replication.throttled.replicas":
				leader = cfg.MaybeValue()
			case "follower.replication.throttled.replicas":
				follower = cfg.MaybeValue()
			}
		}
		return leader, follower
	}
	if l, f := lists(); l != "0:1,0:2" || f != "0:3" {
		t.Errorf("throttled replicas while moving: leader %q follower %q, want \"0:1,0:2\" and \"0:3\"", l, f)
	}

	// Clients during the move: the whole partition read from its leader,
	// then more records acknowledged by the (unthrottled) ISR.
	clientStart := time.Now()
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchMaxBytes(8<<20))
	defer consumer.Close()
	var read int64
	for read < int64(throttleMiB<<20) {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume during the move: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { read += int64(len(r.Value)) })
	}
	readSecs := time.Since(clientStart).Seconds()
	produceStart := time.Now()
	extra := (2 << 20) / valueSize
	produce(extra)
	produceSecs := time.Since(produceStart).Seconds()
	moving, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	stillMoving := len(moving.Sorted()) > 0

	c.waitMoved(topic, map[int32][]int32{0: {1, 2, 3}}, c.ids()...)
	moveSecs := time.Since(start).Seconds()
	moved := float64((records + extra) * valueSize)
	movedRate := moved / moveSecs
	t.Logf("moved %.1f MiB in %.2f s: %.0f B/s under a throttle of %d B/s (%.2fx); clients meanwhile: read %.1f MiB at %.0f B/s, produced %d KiB acks=all at %.0f B/s; move still listed after the clients: %v",
		moved/(1<<20), moveSecs, movedRate, rate, movedRate/rate, float64(read)/(1<<20), float64(read)/readSecs, extra*valueSize>>10, float64(extra*valueSize)/produceSecs, stillMoving)
	if movedRate > rate*(1+slack) {
		t.Errorf("the new replica caught up at %.0f B/s, above the throttle %d B/s (+%.0f%%)", movedRate, rate, slack*100)
	}
	if r := float64(read) / readSecs; r < 2*rate {
		t.Errorf("a consumer read the leader at %.0f B/s during the move: throttled like a replica (%d B/s)?", r, rate)
	}
	if r := float64(extra*valueSize) / produceSecs; r < 2*rate {
		t.Errorf("an acks=all producer wrote at %.0f B/s during the move: throttled like a replica (%d B/s)?", r, rate)
	}
	if !stillMoving {
		t.Errorf("the move had finished before the clients did: the clients' rates were not measured during a throttled move")
	}

	out, err := reassign("--verify")
	if err != nil || !strings.Contains(out, "completed") || !strings.Contains(out, "replication throttle removed") {
		t.Fatalf("reassign --verify after the move: %v\n%s", err, out)
	}
	if l, f := lists(); l != "" || f != "" {
		t.Errorf("throttled replicas after --verify: leader %q follower %q, want none", l, f)
	}
	for _, id := range []int32{1, 2, 3} {
		eventually(t, 10*time.Second, fmt.Sprintf("broker %d's throttle rates cleared", id), func() error {
			o := c.brokers[id].Output()
			i := strings.LastIndex(o, "replication throttles")
			if i < 0 {
				return fmt.Errorf("broker %d never applied a throttle", id)
			}
			line, _, _ := strings.Cut(o[i:], "\n")
			if !strings.Contains(line, "leader.replication.throttled.rate=-1") || !strings.Contains(line, "follower.replication.throttled.rate=-1") {
				return fmt.Errorf("broker %d's last throttles: %s", id, line)
			}
			return nil
		})
	}
}
