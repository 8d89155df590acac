package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The scenarios below take only a bootstrap address, so each runs against a
// sluice broker and, as the reference, against Apache Kafka.

var topicSeq struct {
	sync.Mutex
	n int
}

func newTopicName(prefix string) string {
	topicSeq.Lock()
	defer topicSeq.Unlock()
	topicSeq.n++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, topicSeq.n)
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil && !errorsIs(err, kerr.TopicAlreadyExists) {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func errorsIs(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// record is what the tests compare, byte for byte.
type record struct {
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
}

// consumeAll reads every partition of topic from the start until want
// records arrived (or fails after 60 s).
func consumeAll(t *testing.T, addr, topic string, partitions int32, want int) []record {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []record
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before the deadline", len(got), want, topic)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s[%d]: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, record{r.Partition, r.Offset, r.Key, r.Value, r.Headers})
		})
	}
	return got
}

// sortRecords orders records by partition, then offset.
func sortRecords(recs []record) {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
}

// checkContiguous fails unless each partition's offsets run 0, 1, 2, ...
func checkContiguous(t *testing.T, recs []record) {
	t.Helper()
	next := map[int32]int64{}
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			t.Fatalf("partition %d: offset %d after %d: offsets not contiguous", r.Partition, r.Offset, next[r.Partition]-1)
		}
		next[r.Partition]++
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

// franzRoundTrip produces records with random binary keys, values and
// headers through franz-go with the given options, then consumes them and
// compares byte for byte, per partition in order, offsets contiguous.
func franzRoundTrip(t *testing.T, addr string, opts ...kgo.Opt) {
	const partitions, n = 3, 600
	topic := newTopicName("franz")
	createTopic(t, addr, topic, partitions)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))

	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent := make([]*kgo.Record, n)
	for i := range sent {
		r := &kgo.Record{Value: randomBytes(rng, rng.IntN(2000))}
		switch i % 4 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		default:
			r.Key = randomBytes(rng, 1+rng.IntN(40))
		}
		if i%5 == 0 {
			r.Headers = []kgo.RecordHeader{{Key: "h", Value: randomBytes(rng, 8)}, {Key: "trace-id", Value: []byte(fmt.Sprint(i))}}
		}
		if i%50 == 0 {
			r.Value = bytes.Repeat([]byte("compressible "), 2000) // several KiB, so codecs matter
		}
		sent[i] = r
	}
	results := cl.ProduceSync(ctx, sent...)
	if err := results.FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := consumeAll(t, addr, topic, partitions, n)
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	sortRecords(got)
	checkContiguous(t, got)
	byPos := map[[2]int64]*kgo.Record{}
	for _, r := range sent {
		byPos[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	for _, g := range got {
		s, ok := byPos[[2]int64{int64(g.Partition), g.Offset}]
		if !ok {
			t.Fatalf("consumed %d/%d, which no acknowledgement reported", g.Partition, g.Offset)
		}
		if !bytes.Equal(s.Key, g.Key) || !bytes.Equal(s.Value, g.Value) || (s.Key == nil) != (g.Key == nil) {
			t.Fatalf("record %d/%d differs: key %x/%x, value len %d/%d", g.Partition, g.Offset, s.Key, g.Key, len(s.Value), len(g.Value))
		}
		if len(s.Headers) != len(g.Headers) {
			t.Fatalf("record %d/%d: %d headers, want %d", g.Partition, g.Offset, len(g.Headers), len(s.Headers))
		}
		for i := range s.Headers {
			if s.Headers[i].Key != g.Headers[i].Key || !bytes.Equal(s.Headers[i].Value, g.Headers[i].Value) {
				t.Fatalf("record %d/%d: header %d differs", g.Partition, g.Offset, i)
			}
		}
	}
}

// franzCodecs are the client configurations of the franz-go scenario.
var franzCodecs = []struct {
	name string
	opts []kgo.Opt
}{
	{"defaults-idempotent-snappy", nil},
	{"gzip", []kgo.Opt{kgo.ProducerBatchCompression(kgo.GzipCompression())}},
	{"lz4", []kgo.Opt{kgo.ProducerBatchCompression(kgo.Lz4Compression())}},
	{"zstd", []kgo.Opt{kgo.ProducerBatchCompression(kgo.ZstdCompression())}},
	{"none-acks1", []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
}

// kcatRoundTrip produces keyed lines with kcat under every -z codec, reads
// them back with kcat -C -e and checks kcat -L's metadata.
func kcatRoundTrip(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopicName("kcat")
	createTopic(t, addr, topic, 2)
	var want []string
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for i := 0; i < 50; i++ {
			line := fmt.Sprintf("%s-key-%d:%s value %d %s", codec, i, codec, i, strings.Repeat("x", i*7))
			in.WriteString(line + "\n")
			want = append(want, strings.Replace(line, ":", "\t", 1))
		}
		if _, err := kafka.Kcat(t, ctx, strings.NewReader(in.String()), "-P", "-b", addr, "-t", topic, "-z", codec, "-K", ":", "-X", "acks=all"); err != nil {
			t.Fatalf("kcat produce -z %s: %v", codec, err)
		}
	}
	// One more into an explicit partition.
	if _, err := kafka.Kcat(t, ctx, strings.NewReader("pkey:to partition one\n"), "-P", "-b", addr, "-t", topic, "-p", "1", "-K", ":"); err != nil {
		t.Fatalf("kcat produce -p 1: %v", err)
	}
	want = append(want, "pkey\tto partition one")

	res, err := kafka.Kcat(t, ctx, nil, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%k\t%s\n`)
	if err != nil {
		t.Fatalf("kcat consume: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	assertSameSet(t, got, want)

	// Offsets as kcat sees them: contiguous per partition.
	res, err = kafka.Kcat(t, ctx, nil, "-C", "-b", addr, "-t", topic, "-p", "1", "-o", "beginning", "-e", "-q", "-f", `%o\n`)
	if err != nil {
		t.Fatalf("kcat consume -p 1: %v", err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n") {
		if line != fmt.Sprint(i) {
			t.Fatalf("partition 1 offset #%d is %q", i, line)
		}
	}

	res, err = kafka.Kcat(t, ctx, nil, "-L", "-b", addr, "-t", topic, "-J")
	if err != nil {
		t.Fatalf("kcat -L: %v", err)
	}
	var md struct {
		Brokers []struct {
			ID   int32  `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Leader    int32 `json:"leader"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(res.Stdout, &md); err != nil {
		t.Fatalf("kcat -L -J output %q: %v", res.Stdout, err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].Name != addr {
		t.Fatalf("kcat -L brokers %+v, want one at %s", md.Brokers, addr)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) != 2 {
		t.Fatalf("kcat -L topics %+v, want %s with 2 partitions", md.Topics, topic)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader != md.Brokers[0].ID {
			t.Fatalf("partition %d leader %d, want broker %d", p.Partition, p.Leader, md.Brokers[0].ID)
		}
	}
	// Plain -L, as a person would run it.
	res, err = kafka.Kcat(t, ctx, nil, "-L", "-b", addr)
	if err != nil || !strings.Contains(string(res.Stdout), fmt.Sprintf("topic \"%s\" with 2 partitions", topic)) {
		t.Fatalf("kcat -L: %v\n%s", err, res.Stdout)
	}
}

// javaConsoleRoundTrip writes keyed lines with the Apache Kafka console
// producer (the Java client: idempotent, acks=all by default) under each
// codec — the Java client frames snappy its own way (xerial) — and reads one
// partition back with the console consumer's --partition.
func javaConsoleRoundTrip(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopicName("java")
	createTopic(t, addr, topic, 2)
	var sent, want []string
	for c, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		var in strings.Builder
		for i := 0; i < 25; i++ {
			k, v := fmt.Sprintf("key-%d-%d", c, i), fmt.Sprintf("%s value %d from the java console producer %s", codec, i, strings.Repeat("z", i*40))
			in.WriteString(k + ":" + v + "\n")
			sent = append(sent, k+"="+v)
		}
		if _, err := kafka.JavaTool(t, ctx, strings.NewReader(in.String()), kafka.ConsoleProducerClass,
			"--bootstrap-server", addr, "--topic", topic,
			"--property", "parse.key=true", "--property", "key.separator=:",
			"--compression-codec", codec); err != nil {
			t.Fatalf("console producer --compression-codec %s: %v", codec, err)
		}
	}
	// Which records went to partition 1 is the Java partitioner's choice:
	// ask franz-go (already proven byte-exact) for the reference.
	all := consumeAll(t, addr, topic, 2, len(sent))
	var read []string
	for _, r := range all {
		read = append(read, string(r.Key)+"="+string(r.Value))
		if r.Partition == 1 {
			want = append(want, string(r.Key)+"="+string(r.Value))
		}
	}
	assertSameSet(t, read, sent)
	// librdkafka decodes what the Java client compressed, too.
	kres, err := kafka.Kcat(t, ctx, nil, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%k=%s\n`)
	if err != nil {
		t.Fatalf("kcat reading the Java producer's records: %v", err)
	}
	assertSameSet(t, strings.Split(strings.TrimSuffix(string(kres.Stdout), "\n"), "\n"), sent)
	if len(want) == 0 {
		t.Fatal("the Java partitioner put no record in partition 1")
	}
	res, err := kafka.JavaTool(t, ctx, nil, kafka.ConsoleConsumerClass,
		"--bootstrap-server", addr, "--topic", topic, "--partition", "1", "--offset", "earliest",
		"--max-messages", fmt.Sprint(len(want)), "--timeout-ms", "30000",
		"--property", "print.key=true", "--property", "key.separator==")
	if err != nil {
		t.Fatalf("console consumer: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("console consumer printed\n%s\nwant\n%s", res.Stdout, strings.Join(want, "\n"))
	}
}
