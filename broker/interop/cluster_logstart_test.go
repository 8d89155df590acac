package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterFollowersFollowLogStart: DeleteRecords on the leader of a
// partition (replication factor 3, small segments) moves its log start;
// the followers learn it from their next fetch answers
// (log_start_offset) and move theirs (their partition.checkpoint says so,
// and their segments wholly below it are deleted). When the leader is
// killed, the new leader answers the same earliest offset and serves
// nothing below it.
func TestClusterFollowersFollowLogStart(t *testing.T) {
	const records, cut = 300, 200
	c := startBrokerCluster(t, 3)
	topic := faultTopic(t, c, "logstart", map[string]string{"segment.bytes": "1024"})
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	for i := range records {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%04d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	view := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
	followers := others(c.ids(), view.Leader)
	segmentsBefore := map[int32]int{}
	for _, id := range followers {
		segmentsBefore[id] = c.segmentCount(id, topic)
	}

	adm := kadm.NewClient(c.client())
	var offs kadm.Offsets
	offs.AddOffset(topic, 0, cut, -1)
	resp, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := resp.Lookup(topic, 0); !ok || r.Err != nil || r.LowWatermark != cut {
		t.Fatalf("DeleteRecords before %d: %+v", cut, r)
	}
	eventually(t, 20*time.Second, fmt.Sprintf("followers %v at log start %d", followers, cut), func() error {
		for _, id := range followers {
			if ls := c.checkpointedLogStart(id, topic, 0); ls != cut {
				return fmt.Errorf("broker %d: checkpointed log start %d", id, ls)
			}
			// The checkpoint is written before the segments below it are
			// removed (a crash between leaves files recovery deletes), so
			// the removal is awaited too.
			if after := c.segmentCount(id, topic); after >= segmentsBefore[id] {
				return fmt.Errorf("broker %d: %d segments after the log start moved to %d, %d before: none deleted", id, after, cut, segmentsBefore[id])
			}
		}
		return nil
	})

	c.brokers[view.Leader].Kill()
	next := c.waitLeaders(topic, 1, followers...)[0]
	if next.Leader == view.Leader {
		t.Fatalf("leader after the kill: %+v", next)
	}
	adm2 := kadm.NewClient(c.clientOf(followers))
	eventually(t, 20*time.Second, "the new leader's earliest offset", func() error {
		starts, err := adm2.ListStartOffsets(ctx, topic)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return err
		}
		if o, _ := starts.Lookup(topic, 0); o.Offset != cut {
			return fmt.Errorf("broker %d answers earliest offset %d, want %d", next.Leader, o.Offset, cut)
		}
		return nil
	})
	consumer := c.clientOf(followers, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer consumer.Close()
	fs := consumer.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != cut || string(recs[0].Value) != fmt.Sprintf("v%04d", cut) {
		t.Fatalf("first record read from the new leader: %v, want offset %d", recs, cut)
	}
	t.Logf("figures: followers %v moved their log start to %d; segments before/after on broker %d: %d/%d",
		followers, cut, followers[0], segmentsBefore[followers[0]], c.segmentCount(followers[0], topic))
}

// checkpointedLogStart reads the log start offset from broker id's
// partition.checkpoint of topic-p (0 when never written).
func (c *brokerCluster) checkpointedLogStart(id int32, topic string, p int32) int64 {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.brokers[id].DataDir, fmt.Sprintf("%s-%d", topic, p), "partition.checkpoint"))
	switch {
	case os.IsNotExist(err):
		return 0
	case err != nil:
		c.t.Fatal(err)
	case len(b) != 4+1+48+4 || string(b[:4]) != "SLCP":
		c.t.Fatalf("broker %d: partition.checkpoint of %d bytes: not the format this test reads", id, len(b))
	}
	return int64(binary.BigEndian.Uint64(b[5:]))
}

// segmentCount counts the segment files of broker id's topic-0.
func (c *brokerCluster) segmentCount(id int32, topic string) int {
	c.t.Helper()
	logs, err := filepath.Glob(filepath.Join(c.brokers[id].DataDir, topic+"-0", "*.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	return len(logs)
}
