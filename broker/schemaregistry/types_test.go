package schemaregistry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
)

func mustParseTyped(t *testing.T, typ, text string) parsedSchema {
	t.Helper()
	ps, err := parseTyped(context.Background(), submission{schemaType: typ, text: text}, nil, 0)
	if err != nil {
		t.Fatalf("%s schema %s: %v", typ, text, err)
	}
	return ps
}

// compatCase is one schema change and whether each direction allows it.
type compatCase struct {
	name              string
	old, new          string
	backward, forward bool
}

func checkCases(t *testing.T, typ string, cases []compatCase) {
	t.Helper()
	for _, c := range cases {
		old, neu := mustParseTyped(t, typ, c.old), mustParseTyped(t, typ, c.new)
		for _, dir := range []struct {
			level string
			want  bool
		}{{LevelBackward, c.backward}, {LevelForward, c.forward}} {
			reasons, err := checkCompatible(dir.level, neu, []parsedSchema{old}, newCheckBudget(DefaultMaxCheckSteps))
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, dir.level, err)
			}
			if got := len(reasons) == 0; got != dir.want {
				t.Errorf("%s under %s: compatible = %v, want %v (reasons %q)", c.name, dir.level, got, dir.want, reasons)
			}
		}
	}
}

const protoV1 = `syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string sku = 2;
  int32 qty = 3;
  oneof pay { string card = 4; string iban = 5; }
  string note = 6;
  string extra = 7;
}`

// TestProtobufCompatibility holds the Protobuf rules to the cases
// Confluent documents (fields matched by number; kinds, scalar groups,
// named types, required fields, oneof moves).
func TestProtobufCompatibility(t *testing.T) {
	with := func(from, to string) string {
		if !strings.Contains(protoV1, from) {
			t.Fatalf("%q is not in the base schema", from)
		}
		return strings.Replace(protoV1, from, to, 1)
	}
	checkCases(t, typeProtobuf, []compatCase{
		{"field added", protoV1, with("string extra = 7;", "string extra = 7; bool gift = 8;"), true, true},
		{"field removed", protoV1, with("string extra = 7;", ""), true, true},
		{"field renamed", protoV1, with("string sku = 2;", "string article = 2;"), true, true},
		{"int32 to int64 (varint group)", protoV1, with("int32 qty = 3;", "int64 qty = 3;"), true, true},
		{"string to bytes", protoV1, with("string sku = 2;", "bytes sku = 2;"), true, true},
		{"int32 to sint32 (zigzag)", protoV1, with("int32 qty = 3;", "sint32 qty = 3;"), false, false},
		{"scalar to message", protoV1, with("string sku = 2;", "Sku sku = 2;") + "\nmessage Sku { string v = 1; }", false, false},
		{"field number changed", protoV1, with("int32 qty = 3;", "string qty = 9; int32 qty2 = 3;"), true, true},
		{"package changed", protoV1, with("package shop;", "package store;"), false, false},
		{"message removed", protoV1 + "\nmessage Extra { int32 a = 1; }", protoV1, false, true},
		{"one field moved into a new oneof", protoV1, with("string note = 6;", "oneof n { string note = 6; }"), true, true},
		{"two fields moved into a new oneof", protoV1, with("string note = 6;\n  string extra = 7;", "oneof n { string note = 6; string extra = 7; }"), false, true},
		{"field moved into an existing oneof", protoV1, with("oneof pay { string card = 4; string iban = 5; }\n  string note = 6;", "oneof pay { string card = 4; string iban = 5; string note = 6; }"), false, true},
	})
	proto2 := `syntax = "proto2"; message P { required int32 a = 1; optional int32 b = 2; }`
	checkCases(t, typeProtobuf, []compatCase{
		{"required field removed", proto2, `syntax = "proto2"; message P { optional int32 b = 2; }`, false, false},
		{"required field added", `syntax = "proto2"; message P { optional int32 b = 2; }`, proto2, false, false},
	})
}

const jsonV1 = `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]}`

// TestJSONSchemaCompatibility: BACKWARD holds when the new schema accepts
// every instance of the old one (FORWARD: the other way round).
func TestJSONSchemaCompatibility(t *testing.T) {
	closed := `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"],"additionalProperties":false}`
	checkCases(t, typeJSON, []compatCase{
		{"property added to an open model", jsonV1, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"age":{"type":"integer"}},"required":["id"]}`, false, true},
		{"property added to a closed model", closed, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"age":{"type":"integer"}},"required":["id"],"additionalProperties":false}`, true, false},
		{"property removed from an open model", jsonV1, `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`, true, false},
		{"property removed from a closed model", closed, `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"additionalProperties":false}`, false, true},
		{"integer widened to number", jsonV1, `{"type":"object","properties":{"id":{"type":"number"},"name":{"type":"string"}},"required":["id"]}`, true, false},
		{"type changed", jsonV1, `{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"}},"required":["id"]}`, false, false},
		{"required added", jsonV1, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id","name"]}`, false, true},
		{"type union widened", jsonV1, `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":["string","null"]}},"required":["id"]}`, true, false},
		{"enum grown", `{"type":"string","enum":["a","b"]}`, `{"type":"string","enum":["a","b","c"]}`, true, false},
		{"maxLength lowered", `{"type":"string","maxLength":10}`, `{"type":"string","maxLength":5}`, false, true},
		{"array items widened", `{"type":"array","items":{"type":"integer"}}`, `{"type":"array","items":{"type":"number"}}`, true, false},
		{"anyOf branch added", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`, true, false},
	})
}

// TestTypedSchemaIdentity: a schema's identity is its type, references and
// normal form: Protobuf text in another layout, or as a base64 descriptor,
// is the same schema; the same text as another type is not.
func TestTypedSchemaIdentity(t *testing.T) {
	a := mustParseTyped(t, typeProtobuf, protoV1)
	spaced := mustParseTyped(t, typeProtobuf, "// a comment\n"+strings.ReplaceAll(protoV1, "\n", "\n\n  "))
	if a.key != spaced.key {
		t.Fatal("comments and spacing changed the identity of a Protobuf schema")
	}
	fdp := protodesc.ToFileDescriptorProto(a.proto)
	b, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	if ser := mustParseTyped(t, typeProtobuf, base64.StdEncoding.EncodeToString(b)); ser.key != a.key {
		t.Fatal("the base64 descriptor form is another schema")
	}
	j1, j2 := mustParseTyped(t, typeJSON, jsonV1), mustParseTyped(t, typeJSON, strings.ReplaceAll(jsonV1, ",", ",\n "))
	if j1.key != j2.key || j1.canonical != jsonV1 {
		t.Fatalf("JSON normal form: %q %q", j1.canonical, j2.canonical)
	}
	if av := mustParseTyped(t, typeAvro, `{"type":"string"}`); av.key == mustParseTyped(t, typeJSON, `{"type":"string"}`).key {
		t.Fatal("an Avro and a JSON schema of the same text share an identity")
	}
	for _, bad := range []struct{ typ, text string }{
		{typeProtobuf, `syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }`},
		{typeProtobuf, `syntax = "proto3"; import "other.proto"; message M { Other o = 1; }`},
		{typeProtobuf, `syntax = "proto3";`},
		{typeJSON, `{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/x.json"}}}`},
		{typeJSON, `{"type": 5}`},
		{typeJSON, strings.Repeat("[", 300) + strings.Repeat("]", 300)},
	} {
		_, err := parseTyped(context.Background(), submission{schemaType: bad.typ, text: bad.text}, nil, 0)
		if ae, ok := err.(*apiError); !ok || ae.code != codeInvalidSchema {
			t.Errorf("%s %.60q: got %v, want a 42201", bad.typ, bad.text, err)
		}
	}
}

// TestProtobufAndJSONThroughTheRegistry registers Protobuf schemas with a
// reference and JSON schemas with franz-go's sr client and reads them back
// the Confluent way: schemaType and references on /schemas/ids/N and on a
// version, lookup by schema, the compatibility endpoint, and the same state
// after a restart (replayed from _schemas).
func TestProtobufAndJSONThroughTheRegistry(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx := testContext(t)
	common := `syntax = "proto3"; package shop; message Money { string currency = 1; int64 units = 2; }`
	c, err := reg.client.CreateSchema(ctx, "money.proto", sr.Schema{Schema: common, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	order := `syntax = "proto3"; package shop; import "money.proto"; import "google/protobuf/timestamp.proto";
message Order { int64 id = 1; Money price = 2; google.protobuf.Timestamp at = 3; }`
	refs := []sr.SchemaReference{{Name: "money.proto", Subject: "money.proto", Version: c.Version}}
	o, err := reg.client.CreateSchema(ctx, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf, References: refs})
	if err != nil {
		t.Fatal(err)
	}
	if o.ID == c.ID {
		t.Fatal("two schemas got one id")
	}
	// Without its reference the import does not resolve.
	if _, err := reg.client.CreateSchema(ctx, "orders2-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf}); srCode(err) != codeInvalidSchema {
		t.Fatalf("a schema whose import is not a reference: %v, want 42201", err)
	}
	js, err := reg.client.CreateSchema(ctx, "users-value", sr.Schema{Schema: jsonV1, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	check := func(reg *testRegistry) {
		t.Helper()
		got, err := reg.client.SchemaByID(ctx, o.ID)
		if err != nil || got.Type != sr.TypeProtobuf || len(got.References) != 1 || got.References[0] != refs[0] || got.Schema != order {
			t.Fatalf("schema %d: %+v %v", o.ID, got, err)
		}
		a := reg.do(t, http.MethodGet, "/schemas/ids/"+itoa(js.ID), "", nil)
		var body map[string]any
		if err := json.Unmarshal(a.body, &body); err != nil || body["schemaType"] != "JSON" {
			t.Fatalf("GET /schemas/ids/%d: %s", js.ID, a.body)
		}
		v, err := reg.client.SchemaByVersion(ctx, "orders-value", -1)
		if err != nil || v.ID != o.ID || v.Type != sr.TypeProtobuf || len(v.References) != 1 {
			t.Fatalf("latest orders-value: %+v %v", v, err)
		}
		// Lookup finds the schema in another layout (its identity is the descriptor).
		found, err := reg.client.LookupSchema(ctx, "orders-value", sr.Schema{Schema: strings.ReplaceAll(order, "; ", ";\n"), Type: sr.TypeProtobuf, References: refs})
		if err != nil || found.ID != o.ID {
			t.Fatalf("lookup by schema: %+v %v", found, err)
		}
		// referencedby names the schemas that use a version (franz-go's SchemaReferences asks it).
		by, err := reg.client.SchemaReferences(ctx, "money.proto", c.Version)
		if err != nil || len(by) != 1 || by[0].ID != o.ID || by[0].Subject != "orders-value" {
			t.Fatalf("referencedby money.proto/%d: %+v %v, want orders-value id %d", c.Version, by, err, o.ID)
		}
		if by, err := reg.client.SchemaReferences(ctx, "orders-value", -1); err != nil || len(by) != 0 {
			t.Fatalf("referencedby orders-value/latest: %+v %v, want none", by, err)
		}
		if types, err := reg.client.SupportedTypes(ctx); err != nil || len(types) != 3 {
			t.Fatalf("/schemas/types: %v %v, want AVRO, JSON, PROTOBUF", types, err)
		}
		// The same text as an Avro schema is not found under the JSON subject.
		if _, err := reg.client.LookupSchema(ctx, "users-value", sr.Schema{Schema: jsonV1, Type: sr.TypeAvro}); err == nil {
			t.Fatal("a JSON schema was found as an Avro one")
		}
	}
	check(reg)
	t.Logf("ids: money.proto %d, orders %d, users %d", c.ID, o.ID, js.ID)
	// BACKWARD (the default): a changed field type is refused, an added field taken.
	bad := strings.Replace(order, "int64 id = 1", "string id = 1", 1)
	if _, err := reg.client.CreateSchema(ctx, "orders-value", sr.Schema{Schema: bad, Type: sr.TypeProtobuf, References: refs}); srCode(err) != codeIncompatibleSchema {
		t.Fatalf("an incompatible Protobuf schema: %v, want 409", err)
	}
	res, err := reg.client.CheckCompatibility(ctx, "orders-value", -1, sr.Schema{Schema: strings.Replace(order, "3; }", "3; string note = 4; }", 1), Type: sr.TypeProtobuf, References: refs})
	if err != nil || !res.Is {
		t.Fatalf("compatibility of an added field: %+v %v", res, err)
	}
	closedAdd := `{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"age":{"type":"integer"}},"required":["id"]}`
	if _, err := reg.client.CreateSchema(ctx, "users-value", sr.Schema{Schema: closedAdd, Type: sr.TypeJSON}); srCode(err) != codeIncompatibleSchema {
		t.Fatalf("a property added to an open model under BACKWARD: %v, want 409", err)
	}
	// A referenced version cannot be deleted (42206), softly or not.
	if err := reg.client.DeleteSchema(ctx, "money.proto", c.Version, sr.SoftDelete); srCode(err) != codeReferenceExists {
		t.Fatalf("deleting a referenced version: %v, want 42206", err)
	}
	if _, err := reg.client.DeleteSubject(ctx, "money.proto", sr.SoftDelete); srCode(err) != codeReferenceExists {
		t.Fatalf("deleting a referenced subject: %v, want 42206", err)
	}
	reg.close()
	check(startRegistry(t, b.addr))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestLatestReferenceIsPinned: a reference to version -1 (latest) is
// stored as the version it resolved to, as Confluent's lookup replaces it:
// an id then keeps one meaning when the referenced subject moves on, the
// version it names cannot be deleted under it, and a replay of the log
// resolves it to the same schema.
func TestLatestReferenceIsPinned(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	ctx := testContext(t)
	if res := reg.client.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "money.proto"); len(res) != 1 || res[0].Err != nil {
		t.Fatalf("set NONE on money.proto: %+v", res)
	}
	v1 := `syntax = "proto3"; package shop; message Money { string currency = 1; }`
	v2 := `syntax = "proto3"; package shop; message Money { string currency = 1; int64 units = 2; }`
	m1, err := reg.client.CreateSchema(ctx, "money.proto", sr.Schema{Schema: v1, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	order := `syntax = "proto3"; package shop; import "money.proto"; message Order { Money price = 1; }`
	latest := []sr.SchemaReference{{Name: "money.proto", Subject: "money.proto", Version: -1}}
	o1, err := reg.client.CreateSchema(ctx, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf, References: latest})
	if err != nil {
		t.Fatal(err)
	}
	got, err := reg.client.SchemaByID(ctx, o1.ID)
	if err != nil || len(got.References) != 1 || got.References[0].Version != m1.Version {
		t.Fatalf("schema %d: references %+v (%v), want money.proto version %d", o1.ID, got.References, err, m1.Version)
	}
	if by, err := reg.client.SchemaReferences(ctx, "money.proto", m1.Version); err != nil || len(by) != 1 || by[0].ID != o1.ID {
		t.Fatalf("referencedby money.proto/%d: %+v %v, want id %d", m1.Version, by, err, o1.ID)
	}
	if _, err := reg.client.CreateSchema(ctx, "money.proto", sr.Schema{Schema: v2, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	if err := reg.client.DeleteSchema(ctx, "money.proto", m1.Version, sr.SoftDelete); srCode(err) != codeReferenceExists {
		t.Fatalf("deleting the version a latest reference resolved to: %v, want 42206", err)
	}
	// The same text against the new latest is another schema.
	o2, err := reg.client.CreateSchema(ctx, "orders-value", sr.Schema{Schema: order, Type: sr.TypeProtobuf, References: latest})
	if err != nil || o2.ID == o1.ID || o2.References[0].Version != m1.Version+1 {
		t.Fatalf("the schema again against money.proto v2: %+v %v, want a new id referencing version %d", o2, err, m1.Version+1)
	}
	reg.close()
	reg = startRegistry(t, b.addr)
	for _, o := range []sr.SubjectSchema{o1, o2} {
		if got, err := reg.client.SchemaByID(ctx, o.ID); err != nil || got.References[0] != o.References[0] {
			t.Fatalf("after a restart, schema %d: %+v %v, want references %+v", o.ID, got, err, o.References)
		}
	}
}
