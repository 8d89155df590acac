package schemaregistry

import (
	"os"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

func TestMain(m *testing.M) { os.Exit(kafka.Main(m)) }

var registryLine = regexp.MustCompile(`schema registry listening on (http://\S+)`)

// processRegistryURL waits for the registry line of a `sluice broker
// --registry-listen` process.
func processRegistryURL(t *testing.T, s *kafka.Sluice) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := registryLine.FindStringSubmatch(s.Output()); m != nil {
			return m[1]
		}
		if err := s.ExitError(); err != nil || time.Now().After(deadline) {
			t.Fatalf("no schema registry line (exit: %v):\n%s", err, s.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBrokerProcessKill9 runs `sluice broker --registry-listen` as a real
// process, registers schemas, kills the process with SIGKILL, starts it
// again on the same data directory: every id resolves to the same schema
// and the next schema gets a new id.
func TestBrokerProcessKill9(t *testing.T) {
	s := kafka.StartSluice(t, "--registry-listen", "127.0.0.1:0")
	url := processRegistryURL(t, s)
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	want := map[int]string{}
	for _, c := range []struct{ subject, schema string }{
		{"users-value", userV1}, {"users-value", userAddDef}, {"orders-value", orderSchema}, {"copy", userV1},
	} {
		got, err := cl.CreateSchema(ctx, c.subject, avroSchema(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.subject, err)
		}
		want[got.ID] = got.Schema.Schema
	}
	if len(want) != 3 {
		t.Fatalf("ids %v: want 3 distinct schemas", want)
	}

	s.Kill()
	s.Restart(t)
	url = processRegistryURL(t, s)
	if cl, err = sr.NewClient(sr.URLs(url)); err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for id := range want {
		schema, err := cl.SchemaByID(ctx, id)
		if err != nil {
			t.Fatalf("id %d after kill -9 and restart: %v", id, err)
		}
		got[id] = schema.Schema
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after kill -9 and restart:\n%v\nbefore:\n%v", got, want)
	}
	if vs, err := cl.SubjectVersions(ctx, "users-value"); err != nil || !reflect.DeepEqual(vs, []int{1, 2}) {
		t.Fatalf("versions after restart: %v %v", vs, err)
	}
	next, err := cl.CreateSchema(ctx, "new-value", avroSchema(`{"type":"record","name":"New","fields":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, reused := want[next.ID]; reused || next.ID <= 3 {
		t.Fatalf("a new schema after the restart got id %d (ids before: %v)", next.ID, want)
	}
}
