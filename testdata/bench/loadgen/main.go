// Command loadgen produces seeded, realistic Avro page views for
// testdata/bench/load.sh: a million user ids, thousands of URLs, referrers,
// user agents, millisecond timestamps spread over the given span.
//
// With --registry it registers the schema under subject <topic>-value and
// frames each value the Confluent way (0x00, the 4-byte big-endian schema id,
// then the Avro binary), as producers using a schema registry do; without it
// the values are bare Avro binary (read with the schema of --schema-out).
// On success it prints one line: records N key_bytes K value_bytes V.
//
// --value protobuf produces the same page views as Confluent-framed Protobuf
// (message PageView of protoText, registered with --registry, which it
// needs; message index 0); --items N adds an array field items of N
// records {sku, qty, price} to each Avro page view (the explode benchmark).
//
//	go run ./testdata/bench/loadgen --bootstrap 127.0.0.1:9092 --topic pv --records 5000000 --registry http://127.0.0.1:8081
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"
)

// schemaText is the 8-field page view the load benchmark produces
// (fixtures.LoadPageView, a projection of testdata/fixtures/pageview.avsc).
var schemaText = fixtures.LoadPageView()

// protoText is the page view in Protobuf: the Avro fields, ts a
// google.protobuf.Timestamp, referrer "" when absent.
const protoText = `syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message PageView {
  google.protobuf.Timestamp ts = 1;
  int64 user_id = 2;
  string session_id = 3;
  string url = 4;
  int32 status = 5;
  string referrer = 6;
  string user_agent = 7;
  int32 duration_ms = 8;
}
`

// withItems returns the Avro page view with an items array added.
func withItems(text string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		fail(err)
	}
	m["fields"] = append(m["fields"].([]any), map[string]any{"name": "items", "type": map[string]any{"type": "array",
		"items": map[string]any{"type": "record", "name": "item", "fields": []any{
			map[string]any{"name": "sku", "type": "string"}, map[string]any{"name": "qty", "type": "int"},
			map[string]any{"name": "price", "type": "double"}}}}})
	b, err := json.Marshal(m)
	if err != nil {
		fail(err)
	}
	return string(b)
}

// protoValue encodes v (the Avro page view's map) as a PageView.
func protoValue(b []byte, v map[string]any) []byte {
	ts := v["ts"].(time.Time)
	var t []byte
	t = protowire.AppendTag(t, 1, protowire.VarintType)
	t = protowire.AppendVarint(t, uint64(ts.Unix()))
	if ns := ts.Nanosecond(); ns != 0 {
		t = protowire.AppendTag(t, 2, protowire.VarintType)
		t = protowire.AppendVarint(t, uint64(ns))
	}
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, t)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(v["user_id"].(int64)))
	str := func(n protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, n, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	num := func(n protowire.Number, x int) {
		if x != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(int64(x)))
		}
	}
	str(3, v["session_id"].(string))
	str(4, v["url"].(string))
	num(5, v["status"].(int))
	if r, ok := v["referrer"].(string); ok {
		str(6, r)
	}
	str(7, v["user_agent"].(string))
	num(8, v["duration_ms"].(int))
	return b
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "broker")
	topic := flag.String("topic", "pageviews", "topic (must exist)")
	records := flag.Int("records", 1_000_000, "records to produce")
	span := flag.Duration("span", 5*time.Hour, "time the records span")
	schemaOut := flag.String("schema-out", "", "write the Avro schema here")
	registry := flag.String("registry", "", "schema registry URL: register the schema under <topic>-value and produce Confluent-framed values")
	value := flag.String("value", "avro", "avro or protobuf (Confluent-framed: needs --registry)")
	items := flag.Int("items", 0, "add an array of this many item records to each Avro page view")
	flag.Parse()
	if *items > 0 {
		schemaText = withItems(schemaText)
	}
	schemaType := sr.TypeAvro
	switch *value {
	case "avro":
	case "protobuf":
		if *registry == "" || *items > 0 {
			fail(fmt.Errorf("--value protobuf needs --registry, and takes no --items"))
		}
		schemaType = sr.TypeProtobuf
	default:
		fail(fmt.Errorf("--value %q: want avro or protobuf", *value))
	}
	if *schemaOut != "" {
		if err := os.WriteFile(*schemaOut, []byte(schemaText), 0o644); err != nil {
			fail(err)
		}
	}
	schema := avro.MustParse(schemaText)
	ctx := context.Background()
	var header []byte // the Confluent framing: magic byte 0, then the schema id
	if *registry != "" {
		text := schemaText
		if schemaType == sr.TypeProtobuf {
			text = protoText
		}
		id, err := register(ctx, *registry, *topic+"-value", text, schemaType)
		if err != nil {
			fail(err)
		}
		header = binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
		if schemaType == sr.TypeProtobuf {
			header = append(header, 0) // the message indexes: the first message
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(*bootstrap), kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		fail(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewSource(1))
	urls := make([]string, 3000)
	for i := range urls {
		urls[i] = fmt.Sprintf("/%s/%d?ref=%d", []string{"p", "c", "search", "cart", "blog"}[i%5], i*7919%100000, i%13)
	}
	agents := make([]string, 300)
	for i := range agents {
		agents[i] = fmt.Sprintf("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.%d (KHTML, like Gecko) Chrome/%d.0.%d Safari/537.36", i%40, 90+i%30, 4000+i)
	}
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	errs := make(chan error, 1)
	var keyBytes, valueBytes int64
	for i := 0; i < *records; i++ {
		user := rng.Int63n(1_000_000)
		v := map[string]any{
			"ts": base.Add(time.Duration(int64(*span) * int64(i) / int64(*records))), "user_id": user,
			"session_id": fmt.Sprintf("%016x", rng.Uint64()), "url": urls[rng.Intn(len(urls))],
			"status": []int{200, 200, 200, 200, 200, 301, 304, 404, 500}[rng.Intn(9)], "referrer": nil,
			"user_agent": agents[rng.Intn(len(agents))], "duration_ms": rng.Intn(60_000),
		}
		if rng.Intn(3) == 0 {
			v["referrer"] = urls[rng.Intn(len(urls))]
		}
		if *items > 0 {
			list := make([]any, *items)
			for j := range list {
				list[j] = map[string]any{"sku": fmt.Sprintf("sku-%d", rng.Intn(20000)), "qty": 1 + rng.Intn(5), "price": float64(rng.Intn(100000)) / 100}
			}
			v["items"] = list
		}
		var b []byte
		if schemaType == sr.TypeProtobuf {
			b = protoValue(append([]byte(nil), header...), v)
		} else {
			body, err := avro.Marshal(schema, v)
			if err != nil {
				fail(err)
			}
			b = append(append(make([]byte, 0, len(header)+len(body)), header...), body...)
		}
		key := []byte(fmt.Sprint(user))
		keyBytes += int64(len(key))
		valueBytes += int64(len(b))
		cl.Produce(ctx, &kgo.Record{Topic: *topic, Key: key, Value: b, Timestamp: v["ts"].(time.Time)},
			func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		fail(err)
	}
	select {
	case err := <-errs:
		fail(err)
	default:
	}
	// The sizes before batching and compression, for load.sh's MB of input.
	fmt.Printf("records %d key_bytes %d value_bytes %d\n", *records, keyBytes, valueBytes)
}

// register puts the schema under subject in the registry at url and returns
// its id (the same id again when it is already registered).
func register(ctx context.Context, url, subject, text string, typ sr.SchemaType) (int, error) {
	rc, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return 0, fmt.Errorf("schema registry %s: %w", url, err)
	}
	ss, err := rc.CreateSchema(ctx, subject, sr.Schema{Schema: text, Type: typ})
	if err != nil {
		return 0, fmt.Errorf("registering %s at %s: %w", subject, url, err)
	}
	return ss.ID, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(1)
}
