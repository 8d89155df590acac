package interop

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
)

// The fault scenarios of issue 20, each on three `sluice broker
// --zookeeper` processes and a real ZooKeeper, with franz-go producers
// (acks=all, idempotent) running through the faults and recording a
// history; after healing, a final read of every partition and the history
// checker (lost, duplicate, inconsistent, ...), and the replicas' batches
// compared (base offset, last offset, leader epoch, CRC) up to the high
// watermark. SLUICE_CLUSTER_LONG=1 runs more kills and rounds.

// faultTopic creates a topic of one partition, replication factor 3,
// min.insync.replicas 2, and waits for its leader everywhere.
func faultTopic(t *testing.T, c *brokerCluster, prefix string, configs map[string]string) string {
	t.Helper()
	topic := newTopicName(prefix)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range map[string]string{"min.insync.replicas": "2"} {
		cfg[k] = &v
	}
	for k, v := range configs {
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, 1, 3, cfg, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	c.waitLeaders(topic, 1, c.ids()...)
	return topic
}

// faultProducer is the scenarios' producer client: acks=all, idempotent
// (franz-go's default), quick to refresh metadata after a failover.
func faultProducer(c *brokerCluster) *kgo.Client {
	return c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RecordDeliveryTimeout(25*time.Second), kgo.ProduceRequestTimeout(5*time.Second))
}

// checkpointedHW reads broker id's partition.checkpoint of topic-p (its
// high watermark as a restart finds it; 0 when never written) and its log
// end from the segment files.
func (c *brokerCluster) checkpointedHW(id int32, topic string, p int32) (hw, leo int64) {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.brokers[id].DataDir, fmt.Sprintf("%s-%d", topic, p), "partition.checkpoint"))
	switch {
	case os.IsNotExist(err):
	case err != nil:
		c.t.Fatal(err)
	case len(b) != 4+1+48+4 || string(b[:4]) != "SLCP":
		c.t.Fatalf("broker %d: partition.checkpoint of %d bytes: not the format this test reads", id, len(b))
	default:
		hw = int64(binary.BigEndian.Uint64(b[5+8:]))
	}
	bs, err := c.replicaBatches(id, topic, p)
	if err != nil {
		c.t.Fatal(err)
	}
	if len(bs) > 0 {
		leo = bs[len(bs)-1].Last + 1
	}
	return hw, leo
}

// step logs how long a scenario has run at a step (verbose runs).
func step(t *testing.T, started time.Time, format string, args ...any) {
	t.Helper()
	t.Logf("%5.1fs "+format, append([]any{time.Since(started).Seconds()}, args...)...)
}

func others(all []int32, except ...int32) []int32 {
	var out []int32
	for _, id := range all {
		if !slices.Contains(except, id) {
			out = append(out, id)
		}
	}
	return out
}

// heal restarts the listed brokers, waits for all brokers and the full
// ISR, then stops the producers; it returns the high watermarks.
func heal(t *testing.T, c *brokerCluster, topic string, prod *producerGroup, dead ...int32) map[int32]int64 {
	t.Helper()
	for _, id := range dead {
		c.brokers[id].Restart(t)
	}
	c.waitBrokers(c.ids()...)
	c.fullISR(topic, 1, c.ids()[0], c.ids()...)
	prod.awaitAcked(100, "healed")
	prod.halt()
	c.fullISR(topic, 1, c.ids()[0], c.ids()...)
	return c.endOffsets(topic)
}

// finish reads everything back, checks the history and the replicas, and
// logs the figures.
func finish(t *testing.T, c *brokerCluster, h *clusterHistory, topic string, ends map[int32]int64, prod *producerGroup, kills int, started time.Time) {
	t.Helper()
	read := h.finalRead(c, topic)
	stats := h.check()
	batches := 0
	eventually(t, 20*time.Second, "every replica holds the batches up to the high watermark", func() error {
		for _, id := range c.ids() {
			bs, err := c.replicaBatches(id, topic, 0)
			if err != nil {
				return err
			}
			if len(bs) == 0 || bs[len(bs)-1].Last+1 < ends[0] {
				return fmt.Errorf("broker %d holds batches up to %v, high watermark %d", id, lastOf(bs), ends[0])
			}
		}
		return nil
	})
	batches = c.checkReplicasIdentical(topic, 1, ends, c.ids()...)
	if stats.ProducedOK == 0 || read == 0 {
		t.Errorf("nothing acknowledged (%d) or read back (%d): the scenario checked nothing", stats.ProducedOK, read)
	}
	t.Logf("figures: %d kills/faults, produces acked %d, failed or unknown %d, final read %d records (high watermark %v), %d identical batches on %d replicas, %v",
		kills, prod.acked, prod.unacked, read, ends, batches, len(c.ids()), time.Since(started).Round(time.Second))
}

// TestClusterLeaderChaseUnderLoad: producers (acks=all, idempotent) run
// while the partition's leader is killed with SIGKILL five times in a row
// (each time brought back and waited for in the ISR). Every acknowledged
// record is read back once, at its acknowledged offset, and the three
// replicas hold identical batches.
func TestClusterLeaderChaseUnderLoad(t *testing.T) {
	started := time.Now()
	c := startBrokerCluster(t, 3)
	h := newClusterHistory(t)
	topic := faultTopic(t, c, "chase", nil)
	prod := h.producers(faultProducer(c), topic, 3)
	t.Cleanup(prod.halt)
	kills := 5
	if clusterLong() {
		kills = 15
	}
	for round := range kills {
		before := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
		step(t, started, "round %d: full ISR, leader %d", round, before.Leader)
		prod.awaitAcked(100, "before the kill")
		c.brokers[before.Leader].Kill()
		live := others(c.ids(), before.Leader)
		after := c.waitLeaders(topic, 1, live...)[0]
		if after.Epoch <= before.Epoch {
			t.Fatalf("round %d: epoch %d after the kill, %d before", round, after.Epoch, before.Epoch)
		}
		prod.awaitAcked(50, "to the new leader, the old one down")
		c.brokers[before.Leader].Restart(t)
		c.waitBrokers(c.ids()...)
	}
	ends := heal(t, c, topic, prod)
	finish(t, c, h, topic, ends, prod, kills, started)
}

// TestClusterHighWatermarkLag is KIP-101's scenario: a follower is killed
// and restarted while producers run, so its checkpointed high watermark is
// behind its log end; once it is back in the ISR (its high watermark still
// learnt from the next fetch answers) the leader and the other follower
// are killed, and it leads alone. A replica that truncated to its own high
// watermark would lose acknowledged records here; nothing acknowledged is
// lost, and after the others return all replicas hold identical batches.
func TestClusterHighWatermarkLag(t *testing.T) {
	started := time.Now()
	c := startBrokerCluster(t, 3)
	step(t, started, "cluster up")
	h := newClusterHistory(t)
	topic := faultTopic(t, c, "hwlag", nil)
	prod := h.producers(faultProducer(c), topic, 3)
	t.Cleanup(prod.halt)
	rounds := 1
	if clusterLong() {
		rounds = 4
	}
	for range rounds {
		v := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
		follower := others(v.Replicas, v.Leader)[0]
		prod.awaitAcked(100, "before the follower's kill")
		c.brokers[follower].Kill()
		hw, leo := c.checkpointedHW(follower, topic, 0)
		step(t, started, "follower %d killed: checkpointed high watermark %d, log end %d", follower, hw, leo)
		if hw >= leo {
			t.Errorf("the scenario's premise: follower %d's checkpointed high watermark %d is not behind its log end %d", follower, hw, leo)
		}
		// Past the killed process's session: the controller sees it die
		// (and drops it from the ISR), and the new process registers at
		// once instead of waiting for the old session to expire.
		time.Sleep(clusterSession + time.Second)
		c.brokers[follower].Restart(t)
		c.waitBrokers(c.ids()...)
		step(t, started, "follower %d restarted and registered", follower)
		c.fullISR(topic, 1, v.Leader, c.ids()...)
		step(t, started, "follower %d in the ISR", follower)
		// In the ISR, its high watermark learnt from the fetch answers
		// behind its log end while producers run: kill the two others at
		// once; it is the only live ISR member and leads.
		rest := others(c.ids(), follower)
		for _, id := range rest {
			c.brokers[id].Kill()
		}
		eventually(t, 30*time.Second, fmt.Sprintf("broker %d leads alone", follower), func() error {
			pv, err := c.topicView(follower, topic)
			if err != nil {
				return err
			}
			if pv[0].Leader != follower {
				return fmt.Errorf("leader %d ISR %v", pv[0].Leader, pv[0].ISR)
			}
			return nil
		})
		step(t, started, "broker %d leads alone", follower)
		for _, id := range rest {
			c.brokers[id].Restart(t)
		}
		c.waitBrokers(c.ids()...)
		step(t, started, "brokers %v back", rest)
	}
	ends := heal(t, c, topic, prod)
	step(t, started, "healed")
	finish(t, c, h, topic, ends, prod, 3*rounds, started)
}

// TestClusterMinISRAndCleanElection: with both followers killed the ISR
// shrinks to the leader alone and an acks=all produce with min.insync
// replicas 2 is refused NOT_ENOUGH_REPLICAS (before append); the leader is
// then killed and the followers (out of the ISR) restarted: with unclean
// leader election off neither is ever elected — the partition stays
// offline — until the last ISR member returns and leads. After healing
// nothing acknowledged is lost. An OffsetCommit to a group whose
// __consumer_offsets partition has shrunk alike is refused
// COORDINATOR_NOT_AVAILABLE, its committed offset unchanged.
func TestClusterMinISRAndCleanElection(t *testing.T) {
	started := time.Now()
	c := startBrokerCluster(t, 3, "min.insync.replicas=2", "offsets.topic.num.partitions=6") // min ISR of the internal topics too
	step(t, started, "cluster up")
	h := newClusterHistory(t)
	topic := faultTopic(t, c, "minisr", map[string]string{"unclean.leader.election.enable": "false"})
	prod := h.producers(faultProducer(c), topic, 2)
	t.Cleanup(prod.halt)
	c.findCoordinator(newTopicName("probe")) // creates __consumer_offsets
	offsets := c.waitLeaders(group.OffsetsTopic, 6, c.ids()...)
	step(t, started, "%s has its leaders", group.OffsetsTopic)

	v := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
	leader := v.Leader
	followers := others(c.ids(), leader)
	// A group coordinated by the leader: its offsets partition shrinks to
	// ISR={leader} with the data partition.
	var groupID string
	var groupPart int32
	for i := 0; groupID == ""; i++ {
		id := fmt.Sprintf("minisr-group-%d", i)
		if p := group.PartitionFor(id, int32(len(offsets))); offsets[p].Leader == leader {
			groupID, groupPart = id, p
		}
	}
	if code := c.offsetCommit(leader, groupID, topic, map[int32]int64{0: 1}); code != 0 {
		t.Fatalf("OffsetCommit with the full ISR: %v", kerr.ErrorForCode(code))
	}
	prod.awaitAcked(100, "before the followers' kill")
	for _, id := range followers {
		c.brokers[id].Kill()
	}
	c.fullISR(topic, 1, leader, leader)
	step(t, started, "followers %v killed, ISR={%d}", followers, leader)
	eventually(t, 20*time.Second, "acks=all refused below min.insync.replicas", func() error {
		if code := c.produceCode(leader, topic, 0); code != kerr.NotEnoughReplicas.Code {
			return fmt.Errorf("produce code %v", kerr.ErrorForCode(code))
		}
		return nil
	})
	// A commit below the offsets topic's min ISR is refused as Kafka's
	// coordinator refuses it (NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE),
	// and the committed offset stays.
	eventually(t, 20*time.Second, "OffsetCommit refused below min.insync.replicas", func() error {
		if pv, err := c.topicView(leader, group.OffsetsTopic); err != nil || !slices.Equal(pv[groupPart].ISR, []int32{leader}) {
			return fmt.Errorf("%s-%d: %+v %v", group.OffsetsTopic, groupPart, pv[groupPart], err)
		}
		if code := c.offsetCommit(leader, groupID, topic, map[int32]int64{0: 2}); code != kerr.CoordinatorNotAvailable.Code {
			return fmt.Errorf("OffsetCommit code %v", kerr.ErrorForCode(code))
		}
		return nil
	})
	step(t, started, "OffsetCommit refused")
	if got, code := c.offsetFetch(leader, groupID, topic); code != 0 || got[0] != 1 {
		t.Errorf("committed offset after the refused commit: %v (code %v), want 1", got, kerr.ErrorForCode(code))
	}
	c.brokers[leader].Kill()
	for _, id := range followers {
		c.brokers[id].Restart(t)
	}
	c.waitBrokers(followers...)
	// The followers are live and out of the ISR: for a while (several
	// controller decisions) the partition must stay without a leader.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range followers {
			pv, err := c.topicView(id, topic)
			if err != nil {
				continue
			}
			if pv[0].Leader >= 0 {
				t.Fatalf("broker %d answers leader %d (ISR %v) while the only ISR member %d is dead: an unclean election", id, pv[0].Leader, pv[0].ISR, leader)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	step(t, started, "no unclean election")
	ends := heal(t, c, topic, prod, leader)
	step(t, started, "healed")
	if got := c.fullISR(topic, 1, leader, c.ids()...)[0]; got.Epoch <= v.Epoch {
		t.Errorf("leader epoch %d after healing, %d before", got.Epoch, v.Epoch)
	}
	finish(t, c, h, topic, ends, prod, 3, started)
}

// TestClusterPausedLeaderFenced: the leader is paused with SIGSTOP past
// its ZooKeeper session while producers run; another ISR member leads in
// a newer epoch. Before it resumes, an acks=all produce of a marked value
// is sent to it alone and waits in its socket; after SIGCONT it is fenced:
// that produce is never acknowledged, its value is not in the partition
// after healing (truncated, if it was appended), and no offset holds two
// records.
func TestClusterPausedLeaderFenced(t *testing.T) {
	started := time.Now()
	c := startBrokerCluster(t, 3)
	h := newClusterHistory(t)
	topic := faultTopic(t, c, "paused", nil)
	prod := h.producers(faultProducer(c), topic, 2)
	t.Cleanup(prod.halt)
	rounds := 1
	if clusterLong() {
		rounds = 4
	}
	var marked []string
	for round := range rounds {
		v := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
		paused := v.Leader
		live := others(c.ids(), paused)
		prod.awaitAcked(100, "before the pause")
		c.signal(syscall.SIGSTOP, paused)
		step(t, started, "leader %d paused", paused)
		after := c.waitLeaders(topic, 1, live...)[0]
		step(t, started, "broker %d leads in epoch %d", after.Leader, after.Epoch)
		time.Sleep(500 * time.Millisecond) // produces go to the new leader (those to the paused one hang)
		if after.Epoch <= v.Epoch || after.Leader == paused {
			t.Fatalf("round %d: leader %d epoch %d after the pause, %d epoch %d before", round, after.Leader, after.Epoch, paused, v.Epoch)
		}
		// Produces of marked values wait in the paused broker's sockets and
		// are read the moment it resumes, racing its news of the election.
		var answers []func() string
		for i := range 8 {
			value := fmt.Sprintf("fenced-%d-%d", round, i)
			marked = append(marked, value)
			answers = append(answers, c.sendProduce(paused, topic, 0, value))
		}
		answered := make(chan string, len(answers))
		for _, answer := range answers {
			go func() { answered <- answer() }()
		}
		c.signal(syscall.SIGCONT, paused)
		codes := map[string]int{}
		for range answers {
			select {
			case got := <-answered:
				if strings.HasPrefix(got, "ok") {
					t.Errorf("round %d: the fenced leader %d acknowledged a marked value to acks=all: %s", round, paused, got)
				}
				codes[strings.SplitN(got, ":", 2)[0]]++
			case <-time.After(40 * time.Second):
				t.Fatalf("round %d: the paused leader never answered", round)
			}
		}
		step(t, started, "round %d: the resumed leader %d answered its queued acks=all produces: %v", round, paused, codes)
		c.waitBrokers(c.ids()...)
	}
	ends := heal(t, c, topic, prod)
	step(t, started, "healed")
	finish(t, c, h, topic, ends, prod, rounds, started)
	truncations := 0
	for _, line := range strings.Split(c.brokers[c.ids()[0]].Output()+c.brokers[c.ids()[1]].Output()+c.brokers[c.ids()[2]].Output(), "\n") {
		if strings.Contains(line, topic) && strings.Contains(line, "msg=truncated") {
			truncations++
		}
	}
	t.Logf("replica truncations logged: %d", truncations)
	for _, id := range c.ids() {
		if found := c.holding(id, topic, marked); len(found) > 0 {
			t.Errorf("broker %d's log holds %q, written by a fenced leader: not truncated", id, found)
		}
	}
}

// sendProduce connects to broker id and writes one acks=all Produce (v7)
// of value on the raw connection at once, so that it waits in the socket
// of a paused broker; the returned func reads the answer and describes it
// ("ok@offset" or the error).
func (c *brokerCluster) sendProduce(id int32, topic string, p int32, value string) func() string {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, batchOf(value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	// Request header v1: api key, version, correlation id, client id.
	msg := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	msg = binary.BigEndian.AppendUint16(msg, 7)
	msg = binary.BigEndian.AppendUint32(msg, 1)
	msg = binary.BigEndian.AppendUint16(msg, uint16(len("fence-test")))
	msg = append(msg, "fence-test"...)
	msg = req.AppendTo(msg)
	conn, err := net.DialTimeout("tcp", c.brokers[id].Addr, 5*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)); err != nil {
		c.t.Fatal(err)
	}
	return func() string {
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(40 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return "no answer: " + err.Error()
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, body); err != nil || len(body) < 4 {
			return fmt.Sprintf("short answer: %v", err)
		}
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(7)
		if err := resp.ReadFrom(body[4:]); err != nil {
			return "unreadable answer: " + err.Error()
		}
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			return kerr.ErrorForCode(sp.ErrorCode).Error()
		}
		return fmt.Sprintf("ok@%d", sp.BaseOffset)
	}
}

// holding reports which of values broker id's log of topic-0 holds: a
// search of the bytes of its batches (the marked values are produced
// uncompressed by batchOf; a compressed batch cannot hold them literally).
func (c *brokerCluster) holding(id int32, topic string, values []string) []string {
	c.t.Helper()
	var found []string
	err := c.eachBatch(id, topic, 0, func(b []byte) {
		for _, v := range values {
			if bytes.Contains(b, []byte(v)) && !slices.Contains(found, v) {
				found = append(found, v)
			}
		}
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return found
}

// batchOf is a RecordBatch v2 of one record holding value (no producer id).
func batchOf(value string) []byte {
	var rec []byte
	rec = append(rec, 0)               // attributes
	rec = binary.AppendVarint(rec, 0)  // timestamp delta
	rec = binary.AppendVarint(rec, 0)  // offset delta
	rec = binary.AppendVarint(rec, -1) // null key
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // headers
	rec = append(binary.AppendVarint(nil, int64(len(rec))), rec...)
	now := time.Now().UnixMilli()
	b := binary.BigEndian.AppendUint64(nil, 0) // base offset
	b = binary.BigEndian.AppendUint32(b, 0)    // length, below
	b = binary.BigEndian.AppendUint32(b, 0)    // partition leader epoch
	b = append(b, 2)                           // magic
	b = binary.BigEndian.AppendUint32(b, 0)    // crc, below
	b = binary.BigEndian.AppendUint16(b, 0)    // attributes
	b = binary.BigEndian.AppendUint32(b, 0)    // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, uint64(now))
	b = binary.BigEndian.AppendUint64(b, ^uint64(0)) // producer id -1
	b = binary.BigEndian.AppendUint16(b, ^uint16(0)) // producer epoch -1
	b = binary.BigEndian.AppendUint32(b, ^uint32(0)) // base sequence -1
	b = binary.BigEndian.AppendUint32(b, 1)          // records
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
