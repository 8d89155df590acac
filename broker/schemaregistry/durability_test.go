package schemaregistry

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// snapshot is everything a client can read about ids and subjects.
type snapshot struct {
	IDs      map[int]string // id → schema text
	Versions map[string][]sr.SubjectSchema
	Levels   map[string]string
}

func takeSnapshot(t *testing.T, reg *testRegistry, ids []int, subjects []string) snapshot {
	t.Helper()
	ctx, cl := testContext(t), reg.client
	s := snapshot{IDs: map[int]string{}, Versions: map[string][]sr.SubjectSchema{}, Levels: map[string]string{}}
	for _, id := range ids {
		got, err := cl.SchemaByID(ctx, id)
		if err != nil {
			t.Fatalf("id %d: %v", id, err)
		}
		s.IDs[id] = got.Schema
	}
	for _, subject := range subjects {
		vs, err := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), subject)
		if err != nil {
			t.Fatalf("versions of %s: %v", subject, err)
		}
		for _, v := range vs {
			ss, err := cl.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), subject, v)
			if err != nil {
				t.Fatalf("%s v%d: %v", subject, v, err)
			}
			s.Versions[subject] = append(s.Versions[subject], ss)
		}
		a := reg.do(t, "GET", "/config/"+subject, "", nil)
		s.Levels[subject] = string(a.body)
	}
	a := reg.do(t, "GET", "/config", "", nil)
	s.Levels[""] = string(a.body)
	return s
}

// fillRegistry registers schemas in several subjects, soft-deletes one
// version and sets levels; it returns the ids and subjects used.
func fillRegistry(t *testing.T, reg *testRegistry) ([]int, []string) {
	t.Helper()
	ctx, cl := testContext(t), reg.client
	var ids []int
	subjects := []string{"a-value", "b-value", "c-value"}
	for i, subject := range subjects {
		for j := range 3 {
			schema := fmt.Sprintf(`{"type":"record","name":"r%d","fields":[{"name":"f","type":"int"}%s]}`, i, extraFields(j))
			got, err := cl.CreateSchema(ctx, subject, avroSchema(schema))
			if err != nil {
				t.Fatalf("%s: %v", subject, err)
			}
			ids = append(ids, got.ID)
		}
	}
	if err := cl.DeleteSchema(ctx, "b-value", 2, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFullTransitive}, "c-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatForward}); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	return ids, subjects
}

func extraFields(n int) string {
	s := ""
	for i := range n {
		s += fmt.Sprintf(`,{"name":"x%d","type":"string","default":""}`, i)
	}
	return s
}

// TestRestartKeepsIDs restarts the registry, then the broker and the
// registry: every id resolves to the same schema, versions, deletions and
// levels are the same, and a new schema gets a new id.
func TestRestartKeepsIDs(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ids, subjects := fillRegistry(t, reg)
	before := takeSnapshot(t, reg, ids, subjects)
	reg.close()

	reg = startRegistry(t, b.addr)
	if after := takeSnapshot(t, reg, ids, subjects); !reflect.DeepEqual(after, before) {
		t.Fatalf("after a registry restart:\n%+v\nbefore:\n%+v", after, before)
	}
	reg.close()
	b.stop()

	b = startBroker(t, b.dir)
	reg = startRegistry(t, b.addr)
	if after := takeSnapshot(t, reg, ids, subjects); !reflect.DeepEqual(after, before) {
		t.Fatalf("after a broker and registry restart:\n%+v\nbefore:\n%+v", after, before)
	}
	got, err := reg.client.CreateSchema(testContext(t), "d-value", avroSchema(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got.ID <= id {
			t.Fatalf("a new schema after the restart got id %d, not above the earlier id %d", got.ID, id)
		}
	}
}

// TestSecondInstance: a registry started on the same broker serves the
// same ids; one that was running already sees the other's writes once it
// has caught up (an unknown id makes it catch up at once).
func TestSecondInstance(t *testing.T) {
	b := startBroker(t, "")
	first := startRegistry(t, b.addr)
	ids, subjects := fillRegistry(t, first)
	second := startRegistry(t, b.addr)
	if a, b := takeSnapshot(t, first, ids, subjects), takeSnapshot(t, second, ids, subjects); !reflect.DeepEqual(a, b) {
		t.Fatalf("second instance:\n%+v\nfirst:\n%+v", b, a)
	}
	ctx := testContext(t)
	got, err := first.client.CreateSchema(ctx, "late-value", avroSchema(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	s, err := second.client.SchemaByID(ctx, got.ID)
	if err != nil || s.Schema != got.Schema.Schema {
		t.Fatalf("the second instance resolves an id the first just registered: %+v %v", s, err)
	}
	// The same schema registered through the other instance keeps its id.
	if again, err := second.client.CreateSchema(ctx, "late-copy", avroSchema(orderSchema)); err != nil || again.ID != got.ID {
		t.Fatalf("same schema through the second instance: %+v %v, want id %d", again, err, got.ID)
	}
}

// TestInstancesRace: two instances register concurrently — distinct
// schemas into shared subjects, and the same schemas into different
// subjects. Every request succeeds, one schema has one id on both
// instances, ids are distinct per schema, and each subject's versions are
// 1..n with no schema twice.
func TestInstancesRace(t *testing.T) {
	b := startBroker(t, "")
	regs := []*testRegistry{startRegistry(t, b.addr), startRegistry(t, b.addr)}
	ctx := testContext(t)
	for _, reg := range regs[:1] {
		if res := reg.client.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
	const perWorker = 6
	schemaText := func(n int) string {
		return fmt.Sprintf(`{"type":"record","name":"race%d","fields":[{"name":"f","type":"long"}]}`, n)
	}
	type result struct {
		schema int
		id     int
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
	)
	for w := range 4 {
		reg := regs[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				// Workers 0 and 1 (one per instance) register the same
				// schemas in their own subjects; 2 and 3 register distinct
				// schemas into one shared subject.
				n, subject := i, fmt.Sprintf("same-%d", w)
				if w >= 2 {
					n, subject = 100+w*perWorker+i, "shared"
				}
				got, err := reg.client.CreateSchema(ctx, subject, avroSchema(schemaText(n)))
				if err != nil {
					t.Errorf("worker %d: %s: %v", w, subject, err)
					return
				}
				mu.Lock()
				results = append(results, result{n, got.ID})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	idOf, schemaOf := map[int]int{}, map[int]int{}
	for _, r := range results {
		if id, ok := idOf[r.schema]; ok && id != r.id {
			t.Fatalf("schema %d got ids %d and %d", r.schema, id, r.id)
		}
		if s, ok := schemaOf[r.id]; ok && s != r.schema {
			t.Fatalf("id %d given to schemas %d and %d", r.id, s, r.schema)
		}
		idOf[r.schema], schemaOf[r.id] = r.id, r.schema
	}
	var ids []int
	for id := range schemaOf {
		ids = append(ids, id)
	}
	subjects := []string{"same-0", "same-1", "shared"}
	snaps := []snapshot{takeSnapshot(t, regs[0], ids, subjects), takeSnapshot(t, regs[1], ids, subjects)}
	if !reflect.DeepEqual(snaps[0], snaps[1]) {
		t.Fatalf("the instances disagree:\n%+v\n%+v", snaps[0], snaps[1])
	}
	for subject, versions := range snaps[0].Versions {
		seen := map[int]bool{}
		for i, v := range versions {
			if v.Version != i+1 || seen[v.ID] {
				t.Fatalf("%s: versions %+v", subject, versions)
			}
			seen[v.ID] = true
		}
	}
	if n := len(snaps[0].Versions["shared"]); n != 2*perWorker {
		t.Fatalf("shared subject has %d versions, want %d", n, 2*perWorker)
	}
	var lost float64
	for _, reg := range regs {
		lost += testCounter(reg.metrics.raceLost)
	}
	t.Logf("%d registrations, %v races lost and retried", len(results), lost)
}

// TestBrokerOutage: while the broker is down, reads are served from memory,
// writes fail with a store error once the write timeout passes (not a
// hang), bad input is still a 4xx; when the broker is back on its address,
// writes work again.
func TestBrokerOutage(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{Bootstrap: []string{b.addr}, WriteTimeout: 2 * time.Second})
	if a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userV1)); string(a.body) != `{"id":1}` {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	b.stop()
	if a := reg.do(t, "GET", "/schemas/ids/1", "", nil); a.status != 200 {
		t.Fatalf("read while the broker is down: %d %s", a.status, a.body)
	}
	start := time.Now()
	a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userAddDef))
	if a.status != 500 || a.errorCode() != codeStoreError && a.errorCode() != codeOperationTimeout {
		t.Fatalf("write while the broker is down: %d %s", a.status, a.body)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("a write waited %v with a 2s write timeout", waited)
	}
	if a := reg.do(t, "POST", "/subjects/s/versions", contentType, []byte(`{"schema":"{"}`)); a.errorCode() != codeInvalidSchema {
		t.Fatalf("bad input while the broker is down: %d %s", a.status, a.body)
	}
	b = startBrokerAt(t, b.dir, b.addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userAddDef))
		if a.status == 200 {
			if string(a.body) != `{"id":2}` {
				t.Fatalf("write after the outage: %s", a.body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes did not recover after the broker came back: %d %s", a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond) // poll, not hammer
	}
}

// TestRefusesUnusableTopic: a topic that would lose schemas (time
// retention) or order (several partitions) is refused at start.
func TestRefusesUnusableTopic(t *testing.T) {
	b := startBroker(t, "")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testContext(t)
	deletePolicy := "delete"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &deletePolicy}, "retained"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "split"); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"retained", "split"} {
		reg, err := New(ctx, Options{Bootstrap: []string{b.addr}, Topic: topic, Logger: testLogger(t)})
		if !errors.Is(err, ErrTopic) {
			if reg != nil {
				_ = reg.Close(ctx)
			}
			t.Fatalf("topic %s: %v, want ErrTopic", topic, err)
		}
		t.Logf("%s: %v", topic, err)
	}
}
