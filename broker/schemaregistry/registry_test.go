package schemaregistry

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSRClient drives the registry with franz-go's sr client: register,
// register again, the same schema in another subject, look up, read back,
// check compatibility.
func TestSRClient(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx, cl := testContext(t), reg.client

	v1, err := cl.CreateSchema(ctx, "users-value", avroSchema(userV1))
	if err != nil {
		t.Fatal(err)
	}
	if v1.ID != 1 || v1.Version != 1 || v1.Subject != "users-value" {
		t.Fatalf("first registration: %+v", v1)
	}
	// The same schema, spelled differently, is the same schema.
	again, err := cl.RegisterSchema(ctx, "users-value", avroSchema(userSpaced), -1, -1)
	if err != nil || again != v1.ID {
		t.Fatalf("registering the same schema again: id %d, %v; want %d", again, err, v1.ID)
	}
	// In another subject it keeps its global id, at version 1 there.
	other, err := cl.CreateSchema(ctx, "users-copy", avroSchema(userV1))
	if err != nil || other.ID != v1.ID || other.Version != 1 {
		t.Fatalf("same schema in another subject: %+v, %v", other, err)
	}
	order, err := cl.CreateSchema(ctx, "orders-value", avroSchema(orderSchema))
	if err != nil || order.ID == v1.ID {
		t.Fatalf("a different schema: %+v, %v", order, err)
	}
	v2, err := cl.CreateSchema(ctx, "users-value", avroSchema(userAddDef))
	if err != nil || v2.Version != 2 || v2.ID == v1.ID || v2.ID == order.ID {
		t.Fatalf("second version: %+v, %v", v2, err)
	}

	subjects, err := cl.Subjects(ctx)
	if err != nil || !reflect.DeepEqual(subjects, []string{"orders-value", "users-copy", "users-value"}) {
		t.Fatalf("subjects %v, %v", subjects, err)
	}
	versions, err := cl.SubjectVersions(ctx, "users-value")
	if err != nil || !reflect.DeepEqual(versions, []int{1, 2}) {
		t.Fatalf("versions %v, %v", versions, err)
	}
	latest, err := cl.SchemaByVersion(ctx, "users-value", -1)
	if err != nil || latest.Version != 2 || latest.ID != v2.ID {
		t.Fatalf("latest %+v, %v", latest, err)
	}
	text, err := cl.SchemaTextByVersion(ctx, "users-value", 1)
	if err != nil || text != latest.Schema.Schema && !strings.Contains(text, `"name":"name"`) {
		t.Fatalf("schema text %s, %v", text, err)
	}
	byID, err := cl.SchemaByID(ctx, v1.ID)
	if err != nil || byID.Schema != v1.Schema.Schema {
		t.Fatalf("by id: %+v, %v", byID, err)
	}
	found, err := cl.LookupSchema(ctx, "users-value", avroSchema(userSpaced))
	if err != nil || found.ID != v1.ID || found.Version != 1 {
		t.Fatalf("lookup: %+v, %v", found, err)
	}
	if _, err := cl.LookupSchema(ctx, "users-value", avroSchema(orderSchema)); srCode(err) != codeSchemaNotFound {
		t.Fatalf("lookup of a schema not in the subject: %v", err)
	}
	if _, err := cl.LookupSchema(ctx, "nobody", avroSchema(orderSchema)); srCode(err) != codeSubjectNotFound {
		t.Fatalf("lookup in an unknown subject: %v", err)
	}
	usages, err := cl.SchemaVersionsByID(ctx, v1.ID)
	want := []sr.SubjectVersion{{Subject: "users-copy", Version: 1}, {Subject: "users-value", Version: 1}}
	if err != nil || !reflect.DeepEqual(usages, want) {
		t.Fatalf("versions of id %d: %v, %v", v1.ID, usages, err)
	}

	ok, err := cl.CheckCompatibility(ctx, "users-value", -1, avroSchema(userNoName))
	if err != nil || !ok.Is {
		t.Fatalf("BACKWARD: removing a field is compatible (the new reader skips it): %+v, %v", ok, err)
	}
	bad, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), "users-value", 1, avroSchema(userAddReq))
	if err != nil || bad.Is || len(bad.Messages) == 0 {
		t.Fatalf("BACKWARD: adding a field without a default: %+v, %v", bad, err)
	}
	if _, err := cl.CheckCompatibility(ctx, "users-value", 7, avroSchema(userAddReq)); srCode(err) != codeVersionNotFound {
		t.Fatalf("compatibility with a missing version: %v", err)
	}
	if _, err := cl.CheckCompatibility(ctx, "nobody", -1, avroSchema(userAddReq)); srCode(err) != codeSubjectNotFound {
		t.Fatalf("compatibility in an unknown subject: %v", err)
	}
	// A JSON schema is a valid schema, but not a compatible change of an
	// Avro subject (as Confluent answers a change of schema type).
	if _, err := cl.RegisterSchema(ctx, "users-value", sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON}, -1, -1); srCode(err) != codeIncompatibleSchema {
		t.Fatalf("a JSON schema in an Avro subject: %v, want 409", err)
	}
}

// TestBackwardDefault: under the default level (BACKWARD) a field added
// with a default is accepted and one added without a default is refused
// with 409. A field removed is accepted (the new schema reads old data by
// skipping it), as Confluent does; FORWARD and FULL refuse removing a field
// that has no default.
func TestBackwardDefault(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx, cl := testContext(t), reg.client
	if _, err := cl.CreateSchema(ctx, "s", avroSchema(userV1)); err != nil {
		t.Fatal(err)
	}
	_, err := cl.CreateSchema(ctx, "s", avroSchema(userAddReq))
	if srCode(err) != codeIncompatibleSchema {
		t.Fatalf("BACKWARD accepted a field added without a default: %v", err)
	}
	if re := err.(*sr.ResponseError); re.StatusCode != http.StatusConflict || !strings.Contains(re.Message, "incompatible") {
		t.Fatalf("answer %d %q", re.StatusCode, re.Message)
	}
	if got, err := cl.CreateSchema(ctx, "s", avroSchema(userAddDef)); err != nil || got.Version != 2 {
		t.Fatalf("BACKWARD refused a field added with a default: %+v %v", got, err)
	}
	if got, err := cl.CreateSchema(ctx, "s", avroSchema(userNoName)); err != nil || got.Version != 3 {
		t.Fatalf("BACKWARD refused removing fields (name, email): %+v %v", got, err)
	}
	for _, level := range []sr.CompatibilityLevel{sr.CompatForward, sr.CompatFull} {
		subject := "strict-" + level.String()
		if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: level}, subject); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
		if _, err := cl.CreateSchema(ctx, subject, avroSchema(userV1)); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.CreateSchema(ctx, subject, avroSchema(userNoName)); srCode(err) != codeIncompatibleSchema {
			t.Fatalf("%s accepted removing a field without a default: %v", level, err)
		}
	}
}

// TestConfigLevels sets each level on its own subject and registers a
// history whose last schema each level must accept or refuse.
func TestConfigLevels(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx, cl := testContext(t), reg.client
	const (
		v1      = `{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}`
		aDef    = `{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":0}]}`
		removeA = `{"type":"record","name":"r","fields":[]}`
		aString = `{"type":"record","name":"r","fields":[{"name":"a","type":"string","default":"x"}]}`
	)
	for _, c := range []struct {
		level   string
		history []string
		next    string
		ok      bool
	}{
		{LevelNone, []string{v1}, `{"type":"record","name":"r","fields":[{"name":"a","type":"string"}]}`, true},
		{LevelBackward, []string{v1, removeA}, aString, true},
		{LevelBackwardTransitive, []string{v1, removeA}, aString, false},
		{LevelForward, []string{v1, aDef}, removeA, true},
		{LevelForwardTransitive, []string{v1, aDef}, removeA, false},
		{LevelFull, []string{v1, aDef}, removeA, true},
		{LevelFullTransitive, []string{v1, aDef}, removeA, false},
	} {
		subject := "level-" + c.level
		if a := reg.do(t, "PUT", "/config/"+subject, contentType, []byte(`{"compatibility":"`+c.level+`"}`)); a.status != 200 || string(a.body) != `{"compatibility":"`+c.level+`"}` {
			t.Fatalf("PUT /config/%s: %d %s", subject, a.status, a.body)
		}
		got := cl.Compatibility(ctx, subject)[0]
		if got.Err != nil || got.Level.String() != c.level {
			t.Fatalf("GET /config/%s: %+v", subject, got)
		}
		for _, h := range c.history {
			if _, err := cl.CreateSchema(ctx, subject, avroSchema(h)); err != nil {
				t.Fatalf("%s: history %s: %v", c.level, h, err)
			}
		}
		check, err := cl.CheckCompatibility(ctx, subject, -2, avroSchema(c.next))
		if err != nil || check.Is != c.ok {
			t.Fatalf("%s: POST /compatibility/subjects/%s/versions: %+v %v, want %v", c.level, subject, check, err, c.ok)
		}
		_, err = cl.CreateSchema(ctx, subject, avroSchema(c.next))
		if c.ok && err != nil || !c.ok && srCode(err) != codeIncompatibleSchema {
			t.Fatalf("%s: registering %s: %v, want compatible=%v", c.level, c.next, err, c.ok)
		}
	}
	// The global level, and a subject without its own level.
	if a := reg.do(t, "GET", "/config/level-unset", "", nil); a.errorCode() != codeSubjectCompatNotConfigured {
		t.Fatalf("GET /config of a subject without a level: %d %s", a.status, a.body)
	}
	if a := reg.do(t, "GET", "/config/level-unset?defaultToGlobal=true", "", nil); string(a.body) != `{"compatibilityLevel":"BACKWARD"}` {
		t.Fatalf("defaultToGlobal: %s", a.body)
	}
	if a := reg.do(t, "PUT", "/config", "application/json", []byte(`{"compatibility":"full"}`)); a.status != 200 {
		t.Fatalf("PUT /config: %d %s", a.status, a.body)
	}
	if a := reg.do(t, "GET", "/config", "", nil); string(a.body) != `{"compatibilityLevel":"FULL"}` {
		t.Fatalf("GET /config: %s", a.body)
	}
	if a := reg.do(t, "PUT", "/config", contentType, []byte(`{"compatibility":"SIDEWAYS"}`)); a.errorCode() != codeInvalidCompatibilityLevel || a.status != 422 {
		t.Fatalf("an invalid level: %d %s", a.status, a.body)
	}
	if a := reg.do(t, "DELETE", "/config", "", nil); string(a.body) != `{"compatibilityLevel":"FULL"}` {
		t.Fatalf("DELETE /config: %s", a.body)
	}
	if a := reg.do(t, "GET", "/config", "", nil); string(a.body) != `{"compatibilityLevel":"BACKWARD"}` {
		t.Fatalf("GET /config after DELETE: %s", a.body)
	}
	if a := reg.do(t, "DELETE", "/config/level-FULL", "", nil); string(a.body) != `{"compatibilityLevel":"FULL"}` {
		t.Fatalf("DELETE /config/level-FULL answers the level it removed: %s", a.body)
	}
	if a := reg.do(t, "DELETE", "/config/level-FULL", "", nil); a.errorCode() != codeSubjectCompatNotConfigured {
		t.Fatalf("DELETE /config of a subject without a level: %s", a.body)
	}
}

// TestDeletes walks Confluent's soft-then-permanent delete rules.
func TestDeletes(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx, cl := testContext(t), reg.client
	v1, err := cl.CreateSchema(ctx, "d", avroSchema(userV1))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := cl.CreateSchema(ctx, "d", avroSchema(userAddDef))
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string, err error, code int) {
		t.Helper()
		if srCode(err) != code {
			t.Fatalf("%s: %v, want error code %d", what, err, code)
		}
	}
	expect("permanent delete of a live version", cl.DeleteSchema(ctx, "d", 1, sr.HardDelete), codeVersionNotSoftDeleted)
	if err := cl.DeleteSchema(ctx, "d", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	expect("soft delete twice", cl.DeleteSchema(ctx, "d", 1, sr.SoftDelete), codeVersionSoftDeleted)
	_, err = cl.SchemaByVersion(ctx, "d", 1)
	expect("reading a soft-deleted version", err, codeVersionNotFound)
	if got, err := cl.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), "d", 1); err != nil || got.ID != v1.ID {
		t.Fatalf("reading a soft-deleted version with deleted=true: %+v %v", got, err)
	}
	if vs, err := cl.SubjectVersions(ctx, "d"); err != nil || !reflect.DeepEqual(vs, []int{2}) {
		t.Fatalf("versions after a soft delete: %v %v", vs, err)
	}
	if s, err := cl.SchemaByID(ctx, v1.ID); err != nil || s.Schema == "" {
		t.Fatalf("the id of a soft-deleted version still resolves: %v", err)
	}
	expect("permanent delete of a subject with a live version", func() error { _, err := cl.DeleteSubject(ctx, "d", sr.HardDelete); return err }(), codeSubjectNotSoftDeleted)
	if vs, err := cl.DeleteSubject(ctx, "d", sr.SoftDelete); err != nil || !reflect.DeepEqual(vs, []int{2}) {
		t.Fatalf("soft delete of the subject: %v %v", vs, err)
	}
	_, err = cl.DeleteSubject(ctx, "d", sr.SoftDelete)
	expect("soft delete of a soft-deleted subject", err, codeSubjectSoftDeleted)
	_, err = cl.SubjectVersions(ctx, "d")
	expect("versions of a soft-deleted subject", err, codeSubjectNotFound)
	if s, _ := cl.Subjects(ctx); slices.Contains(s, "d") {
		t.Fatalf("subjects lists a soft-deleted subject: %v", s)
	}
	if s, _ := cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted)); !slices.Contains(s, "d") {
		t.Fatalf("subjects?deleted=true omits a soft-deleted subject: %v", s)
	}
	// Registering again after a soft delete makes a new version with the old id.
	if again, err := cl.CreateSchema(ctx, "d", avroSchema(userV1)); err != nil || again.ID != v1.ID || again.Version != 3 {
		t.Fatalf("re-registering after a soft delete: %+v %v", again, err)
	}
	if err := cl.DeleteSchema(ctx, "d", 3, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if vs, err := cl.DeleteSubject(ctx, "d", sr.HardDelete); err != nil || !reflect.DeepEqual(vs, []int{1, 2, 3}) {
		t.Fatalf("permanent delete of the subject: %v %v", vs, err)
	}
	_, err = cl.DeleteSubject(ctx, "d", sr.HardDelete)
	expect("permanent delete twice", err, codeSubjectNotFound)
	if s, _ := cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted)); slices.Contains(s, "d") {
		t.Fatalf("a permanently deleted subject is still listed: %v", s)
	}
	_, err = cl.SchemaByID(ctx, v2.ID)
	expect("the id of a permanently deleted schema", err, codeSchemaNotFound)
	// The id is never given to another schema; the same schema gets it back.
	if o, err := cl.CreateSchema(ctx, "o", avroSchema(orderSchema)); err != nil || o.ID <= v2.ID {
		t.Fatalf("a new schema after a permanent delete: %+v %v (ids so far up to %d)", o, err, v2.ID)
	}
	if back, err := cl.CreateSchema(ctx, "d2", avroSchema(userAddDef)); err != nil || back.ID != v2.ID {
		t.Fatalf("a permanently deleted schema registered again: %+v %v, want id %d", back, err, v2.ID)
	}
}

// TestSerdeThroughTopic: a producer frames Avro records with sr.Serde (byte
// 0, the id big-endian, Avro binary) and sends them through a sluice topic;
// a consumer that knows nothing but the registry's URL decodes them.
func TestSerdeThroughTopic(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx := testContext(t)
	type User struct {
		ID    int64   `avro:"id"`
		Name  string  `avro:"name"`
		Email *string `avro:"email"`
	}
	registered, err := reg.client.CreateSchema(ctx, "users-value", avroSchema(userAddDef))
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(registered.Schema.Schema)
	var producerSerde sr.Serde
	producerSerde.Register(registered.ID, User{},
		sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic("users"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("users"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var sent []User
	for i := range 20 {
		email := fmt.Sprintf("u%d@example.com", i)
		u := User{ID: int64(i), Name: fmt.Sprintf("user %d", i)}
		if i%2 == 0 {
			u.Email = &email
		}
		value, err := producerSerde.Encode(u)
		if err != nil {
			t.Fatal(err)
		}
		if value[0] != 0 || binary.BigEndian.Uint32(value[1:5]) != uint32(registered.ID) {
			t.Fatalf("framing % x, want 0x00 and id %d", value[:5], registered.ID)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, u)
	}

	// The consumer's serde learns each id from the registry.
	var consumerSerde sr.Serde
	consumer, _ := sr.NewClient(sr.URLs(reg.url))
	var got []User
	for len(got) < len(sent) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), len(sent), err)
		}
		for _, r := range fetches.Records() {
			id, _, err := consumerSerde.DecodeID(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !consumerSerde.IsRegistered(id) {
				s, err := consumer.SchemaByID(ctx, id)
				if err != nil {
					t.Fatalf("schema %d: %v", id, err)
				}
				readerSchema := avro.MustParse(s.Schema)
				consumerSerde.Register(id, User{}, sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(readerSchema, b, v) }))
			}
			var u User
			if err := consumerSerde.Decode(r.Value, &u); err != nil {
				t.Fatal(err)
			}
			got = append(got, u)
		}
	}
	if !reflect.DeepEqual(got, sent) {
		t.Fatalf("round trip:\n got %+v\nsent %+v", got, sent)
	}
}
