package interop

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The Sarama scenario: IBM's Go client, unchanged, against a bootstrap
// address. It runs against a sluice broker and, as the reference, against
// Apache Kafka.

func TestSaramaAgainstSluice(t *testing.T) {
	saramaScenario(t, sharedSluice(t).Addr)
}

func TestReferenceSaramaAgainstApacheKafka(t *testing.T) {
	saramaScenario(t, kafka.SharedKafka(t).Addr)
}

// saramaCodecs are the codecs of the idempotent SyncProducer passes.
var saramaCodecs = []struct {
	name  string
	codec sarama.CompressionCodec
}{
	{"none", sarama.CompressionNone},
	{"gzip", sarama.CompressionGZIP},
	{"snappy", sarama.CompressionSnappy},
	{"lz4", sarama.CompressionLZ4},
	{"zstd", sarama.CompressionZSTD},
}

func saramaScenario(t *testing.T, addr string) {
	for _, c := range saramaCodecs {
		t.Run("idempotent-sync-"+c.name, func(t *testing.T) {
			cfg := saramaConfig(sarama.V2_1_0_0)
			cfg.Producer.Idempotent = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Net.MaxOpenRequests = 1
			cfg.Producer.Compression = c.codec
			saramaSyncRoundTrip(t, addr, cfg)
		})
	}
	t.Run("idempotent-sync-zstd-v4.1", func(t *testing.T) {
		cfg := saramaConfig(sarama.V4_1_0_0)
		cfg.Producer.Idempotent = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.Compression = sarama.CompressionZSTD
		saramaSyncRoundTrip(t, addr, cfg)
	})
	t.Run("async-acks1-default-version", func(t *testing.T) {
		saramaAsyncRoundTrip(t, addr, saramaConfig(sarama.NewConfig().Version))
	})
	t.Run("cluster-admin", func(t *testing.T) { saramaAdmin(t, addr) })
}

// saramaConfig is Sarama's default configuration at version v, with short
// waits so that the test stays quick.
func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "sluice-interop-sarama"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Retry.Backoff = 50 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 50 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	return cfg
}

// saramaTopic creates a fresh 3-partition topic through Sarama's ClusterAdmin.
func saramaTopic(t *testing.T, addr string, cfg *sarama.Config) string {
	t.Helper()
	const partitions = 3
	topic := newTopicName("sarama")
	admin, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("sarama create topic %s: %v", topic, err)
	}
	return topic
}

// saramaMessages makes n keyed records with random binary values and
// headers: every key is set (so the hash partitioner spreads them), a few
// are empty, a few values are large and compressible.
func saramaMessages(topic string, n int) []*sarama.ProducerMessage {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 11))
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		key := randomBytes(rng, rng.IntN(24))
		if i%7 == 0 {
			key = []byte{}
		}
		value := randomBytes(rng, rng.IntN(1500))
		if i%40 == 0 {
			value = bytes.Repeat([]byte("compressible "), 1500)
		}
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(key), Value: sarama.ByteEncoder(value)}
		if i%3 != 0 {
			m.Headers = []sarama.RecordHeader{
				{Key: []byte("trace-id"), Value: []byte(fmt.Sprint(i))},
				{Key: []byte("bin"), Value: randomBytes(rng, rng.IntN(16))},
			}
		}
		msgs[i] = m
	}
	return msgs
}

func saramaSyncRoundTrip(t *testing.T, addr string, cfg *sarama.Config) {
	const n = 150
	topic := saramaTopic(t, addr, cfg)
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama sync producer: %v", err)
	}
	msgs := saramaMessages(topic, n)
	// Half one at a time, half as one SendMessages call (several records per batch).
	for _, m := range msgs[:n/2] {
		if _, _, err := p.SendMessage(m); err != nil {
			p.Close()
			t.Fatalf("sarama send: %v", err)
		}
	}
	if err := p.SendMessages(msgs[n/2:]); err != nil {
		p.Close()
		t.Fatalf("sarama send messages: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("sarama sync producer close: %v", err)
	}
	saramaCheck(t, addr, cfg, topic, msgs)
	checkBatches(t, addr, topic, n, uint8(cfg.Producer.Compression), true)
}

func saramaAsyncRoundTrip(t *testing.T, addr string, cfg *sarama.Config) {
	const n = 600
	cfg.Producer.RequiredAcks = sarama.WaitForLocal
	cfg.Producer.Flush.Messages = 50
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	topic := saramaTopic(t, addr, cfg)
	p, err := sarama.NewAsyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama async producer: %v", err)
	}
	msgs := saramaMessages(topic, n)
	go func() {
		for _, m := range msgs {
			p.Input() <- m
		}
	}()
	deadline := time.After(60 * time.Second)
	for acked := 0; acked < n; {
		select {
		case <-p.Successes():
			acked++
		case e := <-p.Errors():
			p.Close()
			t.Fatalf("sarama async produce: %v", e.Err)
		case <-deadline:
			p.Close()
			t.Fatalf("%d of %d records acknowledged before the deadline", acked, n)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("sarama async producer close: %v", err)
	}
	saramaCheck(t, addr, cfg, topic, msgs)
	checkBatches(t, addr, topic, n, uint8(cfg.Producer.Compression), false)
}

// checkBatches reads topic with franz-go, which reports each record's batch
// attributes, and checks that all n records arrived in batches compressed
// with codec and, for an idempotent producer, carrying a producer ID.
func checkBatches(t *testing.T, addr, topic string, n int, codec uint8, idempotent bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for seen := 0; seen < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go read %d of %d records of %s before the deadline", seen, n, topic)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			if got := r.Attrs.CompressionType(); got != codec {
				t.Fatalf("record %d/%d: batch codec %d, want %d", r.Partition, r.Offset, got, codec)
			}
			if idempotent != (r.ProducerID >= 0) {
				t.Fatalf("record %d/%d: producer ID %d (idempotent producer: %v)", r.Partition, r.Offset, r.ProducerID, idempotent)
			}
		})
	}
}

// saramaCheck reads every partition of topic from OffsetOldest with Sarama's
// consumer and compares the records byte for byte with msgs at the offsets
// their acknowledgements reported; offsets must be contiguous from 0 and the
// client's GetOffset must agree.
func saramaCheck(t *testing.T, addr string, cfg *sarama.Config, topic string, msgs []*sarama.ProducerMessage) {
	t.Helper()
	want := map[int32]map[int64]*sarama.ProducerMessage{}
	for _, m := range msgs {
		if want[m.Partition] == nil {
			want[m.Partition] = map[int64]*sarama.ProducerMessage{}
		}
		if _, dup := want[m.Partition][m.Offset]; dup {
			t.Fatalf("two records acknowledged at %d/%d", m.Partition, m.Offset)
		}
		want[m.Partition][m.Offset] = m
	}
	client, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama client: %v", err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if err != nil {
		t.Fatalf("sarama partitions: %v", err)
	}
	if !slices.Equal(parts, []int32{0, 1, 2}) {
		t.Fatalf("partitions %v, want [0 1 2]", parts)
	}
	if len(want) < 2 {
		t.Fatalf("hash partitioner put all %d records into %d partition(s)", len(msgs), len(want))
	}
	for _, p := range parts {
		oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("get oldest offset %d: %v", p, err)
		}
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("get newest offset %d: %v", p, err)
		}
		if oldest != 0 || newest != int64(len(want[p])) {
			t.Fatalf("partition %d: GetOffset oldest %d newest %d, want 0 and %d", p, oldest, newest, len(want[p]))
		}
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer consumer.Close()
	deadline := time.After(60 * time.Second)
	for _, p := range parts {
		pc, err := consumer.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consume partition %d: %v", p, err)
		}
		for next := int64(0); next < int64(len(want[p])); next++ {
			var g *sarama.ConsumerMessage
			select {
			case g = <-pc.Messages():
			case e := <-pc.Errors():
				pc.Close()
				t.Fatalf("consume partition %d: %v", p, e.Err)
			case <-deadline:
				pc.Close()
				t.Fatalf("partition %d: consumed %d of %d records before the deadline", p, next, len(want[p]))
			}
			if g.Offset != next {
				pc.Close()
				t.Fatalf("partition %d: offset %d where %d was next: offsets not contiguous", p, g.Offset, next)
			}
			if err := saramaSame(want[p][next], g); err != nil {
				pc.Close()
				t.Fatalf("record %d/%d: %v", p, next, err)
			}
		}
		if err := pc.Close(); err != nil {
			t.Fatalf("close partition consumer %d: %v", p, err)
		}
	}
}

// saramaSame compares a produced record with a consumed one byte for byte.
func saramaSame(s *sarama.ProducerMessage, g *sarama.ConsumerMessage) error {
	if s == nil {
		return fmt.Errorf("consumed a record that no acknowledgement reported")
	}
	key, _ := s.Key.Encode()
	value, _ := s.Value.Encode()
	if !bytes.Equal(key, g.Key) {
		return fmt.Errorf("key %x, want %x", g.Key, key)
	}
	if !bytes.Equal(value, g.Value) {
		return fmt.Errorf("value differs (%d bytes, want %d)", len(g.Value), len(value))
	}
	if len(g.Headers) != len(s.Headers) {
		return fmt.Errorf("%d headers, want %d", len(g.Headers), len(s.Headers))
	}
	for i, h := range s.Headers {
		if !bytes.Equal(h.Key, g.Headers[i].Key) || !bytes.Equal(h.Value, g.Headers[i].Value) {
			return fmt.Errorf("header %d is %q=%x, want %q=%x", i, g.Headers[i].Key, g.Headers[i].Value, h.Key, h.Value)
		}
	}
	return nil
}

// saramaAdmin creates, describes, lists and deletes a topic through Sarama's
// ClusterAdmin.
func saramaAdmin(t *testing.T, addr string) {
	cfg := saramaConfig(sarama.NewConfig().Version)
	admin, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama cluster admin: %v", err)
	}
	defer admin.Close()
	topic := newTopicName("sarama-admin")
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false)
	if !errorsIs(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("creating %s again: %v, want %v", topic, err, sarama.ErrTopicAlreadyExists)
	}
	metas, err := admin.DescribeTopics([]string{topic})
	if err != nil {
		t.Fatalf("describe topics: %v", err)
	}
	if len(metas) != 1 || metas[0].Name != topic || metas[0].Err != sarama.ErrNoError || len(metas[0].Partitions) != 2 {
		t.Fatalf("describe %s: %+v", topic, metas)
	}
	for _, p := range metas[0].Partitions {
		if p.Err != sarama.ErrNoError || len(p.Replicas) != 1 || len(p.Isr) != 1 || p.Leader != p.Replicas[0] {
			t.Fatalf("describe %s partition %d: %+v", topic, p.ID, p)
		}
	}
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatalf("list topics: %v", err)
	}
	if d, ok := topics[topic]; !ok || d.NumPartitions != 2 || d.ReplicationFactor != 1 {
		t.Fatalf("list topics: %s is %+v (listed: %v)", topic, d, ok)
	}
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	// Deletion is asynchronous on Kafka: poll until the topic is gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		topics, err := admin.ListTopics()
		if err != nil {
			t.Fatalf("list topics: %v", err)
		}
		if _, ok := topics[topic]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed 30 s after its deletion", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := admin.DeleteTopic(topic); !errorsIs(err, sarama.ErrUnknownTopicOrPartition) {
		t.Fatalf("deleting %s again: %v, want %v", topic, err, sarama.ErrUnknownTopicOrPartition)
	}
}
