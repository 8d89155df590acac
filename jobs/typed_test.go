package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicehq/sluice/internal/protoschema"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// typedClient runs testdata/typed_client.py (Confluent's Python
// serializers, pyarrow) and returns its standard output.
func typedClient(t *testing.T, args ...string) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not found on PATH: run `make deps`")
	}
	if out, err := exec.Command(python, "-c", "import confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema, grpc_tools.protoc, pyarrow").CombinedOutput(); err != nil {
		t.Fatalf("Confluent's Python serializers, grpcio-tools or pyarrow are missing (%v: %s): run `make deps` (deps-registry, deps-python)", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(python, append([]string{"testdata/typed_client.py"}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("typed_client.py %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

const typedJob = `
name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  max_records_per_task: 10
decode:
  format: %s
  registry: %s
on_bad_record: %s
partition:
  by: hour
  time_field: "@timestamp"
output:
  uri: %s
  format: %s
  metadata_columns: true
`

// TestProtobufAndJSONSchemaLoads: Confluent's ProtobufSerializer (a
// message at index [1], importing a referenced file and the well-known
// types) and JSONSerializer produce 30 records each into a sluice broker
// through sluice's registry, two of them records the decoder must refuse.
// Under each on_bad_record policy the load counts the bad ones, and
// pyarrow reads the Parquet back equal, field by field, to what was
// produced, for every row of the mapping tables; DuckDB reads the typed
// columns (a timestamp, a struct field). Avro and JSON-lines output take
// the same rows.
func TestProtobufAndJSONSchemaLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, registry := startSluiceWithRegistry(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const total = 30
	bad := []int64{4, 17}
	for _, c := range []struct {
		format, badText, tsColumn, structField string
	}{
		{"protobuf", "protobuf:", "at", "price.currency"},
		{"json", "not valid under schema id", "at", "address.city"},
	} {
		topic := "typed-" + c.format
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		expected := filepath.Join(t.TempDir(), "expected.json")
		typedClient(t, "produce", "--format", c.format, "--bootstrap", b.Addr, "--registry", registry, "--topic", topic,
			"--count", fmt.Sprint(total), "--bad", "4,17", "--expected", expected)
		badAt := map[int64]string{}
		for _, o := range bad {
			badAt[o] = c.badText
		}
		for _, policy := range policies {
			t.Run(c.format+"/"+policy, func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "out")
				spec, _ := writeJob(t, dir, fmt.Sprintf(typedJob, "typed-"+policy, b.Addr, topic, c.format, registry, policy, out, "parquet"))
				rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1})
				checkPolicy(t, policy, out, topic, rep, err, total, badAt)
				if policy == jobs.BadRecordFail {
					return
				}
				t.Log(typedClient(t, "check", "--expected", expected, "--out", out))
				var n, withTS, withStruct int
				q := fmt.Sprintf(`SELECT count(*), count("%s"), count(%s) FROM read_parquet('%s') WHERE typeof("%s") IN ('TIMESTAMP WITH TIME ZONE', 'TIMESTAMP')`,
					c.tsColumn, c.structField, dataGlob(out, "parquet"), c.tsColumn)
				if err := duck(t).QueryRow(q).Scan(&n, &withTS, &withStruct); err != nil {
					t.Fatalf("duckdb: %v", err)
				}
				if n != total-len(bad) || withTS == 0 || withStruct == 0 {
					t.Fatalf("duckdb: %d rows with a timestamp column (%d set, %d with %s); want %d", n, withTS, withStruct, c.structField, total-len(bad))
				}
			})
		}
		for _, format := range []string{"avro", "jsonl"} {
			t.Run(c.format+"/"+format, func(t *testing.T) {
				dir := t.TempDir()
				out := filepath.Join(dir, "out")
				spec, _ := writeJob(t, dir, fmt.Sprintf(typedJob, "typed-"+format, b.Addr, topic, c.format, registry, jobs.BadRecordSkip, out, format))
				rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1})
				if err != nil || rep.Totals.RowsOut != total-int64(len(bad)) || rep.Totals.Skipped != int64(len(bad)) {
					t.Fatalf("%s output: %v, totals %+v", format, err, rep.Totals)
				}
				if format == "jsonl" {
					var n int
					q := fmt.Sprintf(`SELECT count(*) FROM read_json_auto('%s') WHERE name IS NOT NULL AND "%s" IS NOT NULL`, dataGlob(out, "jsonl"), c.tsColumn)
					if err := duck(t).QueryRow(q).Scan(&n); err != nil || n == 0 {
						t.Fatalf("duckdb over the JSON lines: %d rows with name and %s, %v", n, c.tsColumn, err)
					}
				}
			})
		}
	}
}

// TestProtobufFromFranzGo: franz-go's sr client registers a .proto text
// schema importing another (a reference), and its Serde frames messages of
// a nested message type (index path [0, 0]); the load decodes them and
// DuckDB reads back each field as produced.
func TestProtobufFromFranzGo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, registry := startSluiceWithRegistry(t)
	rc, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	tag := `syntax = "proto3"; package fg; message Tag { string k = 1; }`
	outer := `syntax = "proto3";
package fg;
import "tag.proto";
message Outer {
  enum Kind { A = 0; B = 1; }
  message Event { int64 id = 1; repeated fg.Tag tags = 2; Kind kind = 3; }
  string unused = 1;
}`
	ts, err := rc.CreateSchema(ctx, "fg-tag", sr.Schema{Schema: tag, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	outerSchema, err := rc.CreateSchema(ctx, "fg-value", sr.Schema{Schema: outer, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "tag.proto", Subject: "fg-tag", Version: ts.Version}}})
	if err != nil {
		t.Fatal(err)
	}
	fd, err := protoschema.Parse(ctx, outer, map[string]string{"tag.proto": tag})
	if err != nil {
		t.Fatal(err)
	}
	event := fd.Messages().Get(0).Messages().Get(0)
	var serde sr.Serde
	serde.Register(outerSchema.ID, &dynamicpb.Message{}, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }), sr.Index(0, 0))
	const n = 10
	var recs []*kgo.Record
	for i := range n {
		m := dynamicpb.NewMessage(event)
		m.Set(event.Fields().ByName("id"), protoreflect.ValueOfInt64(int64(i*7)))
		m.Set(event.Fields().ByName("kind"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(i%2)))
		tags := m.Mutable(event.Fields().ByName("tags")).List()
		for j := range i % 3 {
			tm := dynamicpb.NewMessage(event.Fields().ByName("tags").Message())
			tm.Set(tm.Descriptor().Fields().ByName("k"), protoreflect.ValueOfString(fmt.Sprintf("k%d.%d", i, j)))
			tags.Append(protoreflect.ValueOfMessage(tm))
		}
		v, err := serde.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "fg", Value: v, Timestamp: pageViewBase})
	}
	produceAll(t, ctx, b.Addr, "fg", 1, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(typedJob, "fg", b.Addr, "fg", "protobuf", registry, jobs.BadRecordFail, out, "parquet"))
	if _, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1}); err != nil {
		t.Fatal(err)
	}
	rows, err := duck(t).Query(fmt.Sprintf(`SELECT _offset, id, kind, len(tags), coalesce(tags[1].k, '') FROM read_parquet('%s') ORDER BY _offset`, dataGlob(out, "parquet")))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for rows.Next() {
		var (
			off, id   int64
			kind, k   string
			tagsCount int
		)
		if err := rows.Scan(&off, &id, &kind, &tagsCount, &k); err != nil {
			t.Fatal(err)
		}
		i := int(off)
		wantK := ""
		if i%3 > 0 {
			wantK = fmt.Sprintf("k%d.0", i)
		}
		if id != int64(i*7) || kind != []string{"A", "B"}[i%2] || tagsCount != i%3 || k != wantK {
			t.Fatalf("offset %d: id %d kind %s tags %d first %q; want %d %s %d %q", off, id, kind, tagsCount, k, i*7, []string{"A", "B"}[i%2], i%3, wantK)
		}
		got++
	}
	if err := rows.Err(); err != nil || got != n {
		t.Fatalf("%d rows read back, want %d (%v)", got, n, err)
	}
}

// TestTypedDecodersUseRegistryAuth: a Protobuf load from a registry that
// requires basic auth, with decode.registry_auth naming the password file,
// reads every record: the typed decoders' registry client carries the
// credentials, as the Avro decoder's does.
func TestTypedDecodersUseRegistryAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	dir := t.TempDir()
	const writerPW, loaderPW = "writer-Pw-5", "loader-Pw-8"
	passwords := filepath.Join(dir, "registry.passwords")
	for name, body := range map[string]string{passwords: "writer:plain:" + writerPW + "\nloader:plain:" + loaderPW + "\n", filepath.Join(dir, "loader.pw"): loaderPW + "\n"} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port, err := kafka.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	reg := exec.CommandContext(ctx, kafka.SluiceBinary(t), "registry", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--bootstrap", b.Addr, "--registry-password-file", passwords)
	var regOut strings.Builder
	reg.Stdout, reg.Stderr = &regOut, &regOut
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Process.Kill(); reg.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	rc, err := sr.NewClient(sr.URLs(url), sr.BasicAuth("writer", writerPW))
	if err != nil {
		t.Fatal(err)
	}
	text := `syntax = "proto3"; package ra; message Ev { int64 id = 1; }`
	var ss sr.SubjectSchema
	for deadline := time.Now().Add(60 * time.Second); ; {
		if ss, err = rc.CreateSchema(ctx, "ra-value", sr.Schema{Schema: text, Type: sr.TypeProtobuf}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice registry did not answer at %s: %v\n%s", url, err, regOut.String())
		}
		time.Sleep(100 * time.Millisecond) // polling the registry's start, bounded by the deadline
	}
	fd, err := protoschema.Parse(ctx, text, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := fd.Messages().Get(0)
	var serde sr.Serde
	serde.Register(ss.ID, &dynamicpb.Message{}, sr.EncodeFn(func(v any) ([]byte, error) { return proto.Marshal(v.(proto.Message)) }), sr.Index(0))
	const n = 5
	var recs []*kgo.Record
	for i := range n {
		m := dynamicpb.NewMessage(ev)
		m.Set(ev.Fields().ByName("id"), protoreflect.ValueOfInt64(int64(i)))
		v, err := serde.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "ra", Value: v, Timestamp: pageViewBase})
	}
	produceAll(t, ctx, b.Addr, "ra", 1, recs)
	spec, _ := writeJob(t, dir, fmt.Sprintf(typedJob, "ra", b.Addr, "ra", "protobuf",
		url+"\n  registry_auth: {username: loader, password_file: loader.pw}", jobs.BadRecordFail, filepath.Join(dir, "out"), "parquet"))
	rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.RowsOut != n {
		t.Fatalf("%d rows out, want %d", rep.Totals.RowsOut, n)
	}
}
