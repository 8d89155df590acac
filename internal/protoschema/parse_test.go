package protoschema

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/dynamicpb"
)

func readTestProto(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../jobs/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseForms: the text form and the base64 descriptor form of one
// schema compile to the same descriptor; an import that is neither a
// reference nor a well-known type is refused, as are a cycle and junk.
func TestParseForms(t *testing.T) {
	ctx := context.Background()
	common, order := readTestProto(t, "common.proto"), readTestProto(t, "order.proto")
	deps := map[string]string{"common.proto": common}
	fd, err := Parse(ctx, order, deps)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(protodesc.ToFileDescriptorProto(fd))
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := Parse(ctx, common, nil)
	cser, _ := proto.Marshal(protodesc.ToFileDescriptorProto(cb))
	again, err := Parse(ctx, base64.StdEncoding.EncodeToString(b), map[string]string{"common.proto": base64.StdEncoding.EncodeToString(cser)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Messages().ByName("Order").Fields().Len() != fd.Messages().ByName("Order").Fields().Len() {
		t.Fatal("the base64 form compiled to another message")
	}
	for name, c := range map[string]struct {
		text string
		deps map[string]string
	}{
		"missing import": {order, nil},
		"cycle":          {`syntax = "proto3"; import "a.proto"; message M { int32 x = 1; }`, map[string]string{"a.proto": `syntax = "proto3"; import "` + mainFile + `"; message A {}`}},
		"junk":           {"message {", nil},
		"too large":      {strings.Repeat(" ", MaxSchemaBytes+1), nil},
	} {
		if _, err := Parse(ctx, c.text, c.deps); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestAvroMapping: the Avro schema of every message parses, names each
// field of the mapping table with its documented type, and a message
// that contains itself is refused.
func TestAvroMapping(t *testing.T) {
	ctx := context.Background()
	fd, err := Parse(ctx, readTestProto(t, "order.proto"), map[string]string{"common.proto": readTestProto(t, "common.proto")})
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().ByName("Order")
	text, err := AvroSchema(md)
	if err != nil {
		t.Fatal(err)
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	want := map[string]string{
		"id": `"long"`, "small": `"int"`, "u32": `"long"`, "s64": `"long"`, "f": `"float"`, "d": `"double"`, "flag": `"boolean"`,
		"name": `"string"`, "raw": `"bytes"`, "status": `"string"`, "tags": `{"type":"array","items":"string"}`,
		"counts": `{"type":"map","values":"long"}`, "card": `["null","string"]`, "voucher": `["null","long"]`,
		"at": `["null",{"type":"long","logicalType":"timestamp-micros"}]`, "took": `["null","long"]`,
		"note": `["null","string"]`, "maybe": `["null","long"]`, "attrs": `["null","string"]`, "opt": `["null","int"]`,
	}
	for _, f := range s.(*avro.RecordSchema).Fields() {
		if w, ok := want[f.Name()]; ok && f.Type().String() != w {
			t.Errorf("field %s: %s, want %s", f.Name(), f.Type(), w)
		}
	}
	// A zero message is a row of zero values and nulls.
	row, err := Row(dynamicpb.NewMessage(md))
	if err != nil || row["id"] != int64(0) || row["at"] != nil || row["status"] != "NEW" || row["price"] != nil {
		t.Fatalf("zero row: %v %v", row, err)
	}
	rec, err := Parse(ctx, `syntax = "proto3"; message N { N next = 1; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AvroSchema(rec.Messages().Get(0)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a recursive message: %v, want ErrUnsupported", err)
	}
}

// BenchmarkParse compiles the 23-field order.proto with its reference and
// four well-known imports: the cost of one schema id's first record.
func BenchmarkParse(b *testing.B) {
	order, deps := readTestProto(b, "order.proto"), map[string]string{"common.proto": readTestProto(b, "common.proto")}
	for b.Loop() {
		if _, err := Parse(context.Background(), order, deps); err != nil {
			b.Fatal(err)
		}
	}
}
