package schemaregistry

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// confluentClient runs testdata/confluent_client.py (Confluent's Python
// client) and returns its standard output.
func confluentClient(t *testing.T, args ...string) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found on PATH: run `make deps` (deps-registry installs confluent-kafka)")
	}
	if out, err := exec.Command(python, "-c", "import confluent_kafka.schema_registry.avro").CombinedOutput(); err != nil {
		t.Fatalf("Confluent's Python client is missing (%v: %s): run `make deps` (deps-registry installs confluent-kafka)", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, append([]string{"testdata/confluent_client.py"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("confluent_client.py %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

type pageView struct {
	URL      string  `avro:"url" json:"url"`
	TS       int64   `avro:"ts" json:"ts"`
	Referrer *string `avro:"referrer" json:"referrer"`
}

func pageViews(n int) []pageView {
	var out []pageView
	for i := range n {
		v := pageView{URL: fmt.Sprintf("/page/%d", i), TS: 1700000000000 + int64(i)}
		if i%2 == 0 {
			r := fmt.Sprintf("/from/%d", i)
			v.Referrer = &r
		}
		out = append(out, v)
	}
	return out
}

// TestConfluentPythonClient: Confluent's own serializer registers its schema
// and frames records through sluice; franz-go decodes them with the id it
// reads from the registry. Then franz-go's Serde frames records under the
// same schema (same id, another subject) and Confluent's deserializer reads
// them back.
func TestConfluentPythonClient(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx := testContext(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "py-avro", "go-avro"); err != nil {
		t.Fatal(err)
	}
	want := pageViews(10)

	confluentClient(t, "produce", "--bootstrap", b.addr, "--registry", reg.url, "--topic", "py-avro", "--count", "10")
	registered, err := reg.client.SchemaByVersion(ctx, "py-avro-value", -1)
	if err != nil || registered.Version != 1 {
		t.Fatalf("the Confluent serializer's registration: %+v %v", registered, err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"py-avro": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var got []pageView
	for len(got) < len(want) {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(got), len(want))
		}
		for _, r := range fetches.Records() {
			if len(r.Value) < 5 || r.Value[0] != 0 {
				t.Fatalf("not Confluent-framed: % x", r.Value)
			}
			id := int(binary.BigEndian.Uint32(r.Value[1:5]))
			if id != registered.ID {
				t.Fatalf("record framed with id %d, the subject's schema has id %d", id, registered.ID)
			}
			s, err := reg.client.SchemaByID(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var v pageView
			if err := avro.Unmarshal(avro.MustParse(s.Schema), r.Value[5:], &v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Confluent-serialized records:\n got %+v\nwant %+v", got, want)
	}

	// The other way round, with the same schema registered by franz-go.
	goSchema, err := reg.client.CreateSchema(ctx, "go-avro-value", avroSchema(registered.Schema.Schema))
	if err != nil || goSchema.ID != registered.ID {
		t.Fatalf("the same schema in another subject: %+v %v, want id %d", goSchema, err, registered.ID)
	}
	schema := avro.MustParse(goSchema.Schema.Schema)
	var serde sr.Serde
	serde.Register(goSchema.ID, pageView{}, sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }))
	for _, v := range want {
		value, err := serde.Encode(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "go-avro", Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	out := confluentClient(t, "consume", "--bootstrap", b.addr, "--registry", reg.url, "--topic", "go-avro", "--count", "10")
	got = nil
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var v pageView
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		got = append(got, v)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read by Confluent's deserializer:\n got %+v\nwant %+v", got, want)
	}
}
