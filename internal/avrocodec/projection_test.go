package avrocodec_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

func TestProjectionRefusesOtherTypes(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"x","type":"int"},{"name":"l","type":"long"}]}`)
	out := avro.MustParse(`{"type":"record","name":"Sel","fields":[{"name":"x","type":"string"}]}`)
	if _, err := avrocodec.NewProjection(s, out, []int{2}); err == nil {
		t.Fatal("a string field picked from a long was accepted")
	}
	if _, err := avrocodec.NewProjection(s, out, []int{99}); err == nil {
		t.Fatal("a pick out of range was accepted")
	}
	if _, err := avrocodec.NewProjection(s, out, []int{0}); err != nil {
		t.Fatalf("a string picked from a string: %v", err)
	}
}

// An array of items that take no bytes is refused with the schema: a
// count of 2^62 of them, two bytes of record, would be that much work.
// Items of one byte at least bound the work by the record's size.
func TestScanBoundsEmptyItems(t *testing.T) {
	empty := avro.MustParse(`{"type":"record","name":"E","fields":[{"name":"xs","type":{"type":"array","items":{"type":"record","name":"Z","fields":[]}}}]}`)
	if _, err := avrocodec.NewProjection(empty, nil, nil); !errors.Is(err, avrocodec.ErrUnboundedItems) || !errors.Is(err, avrocodec.ErrUnsupportedSchema) {
		t.Fatalf("array of empty records: %v", err)
	}
	s := avro.MustParse(`{"type":"record","name":"L","fields":[{"name":"xs","type":{"type":"array","items":"boolean"}}]}`)
	p, err := avrocodec.NewProjection(s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := avrocodec.AppendLong(avrocodec.AppendLong(nil, math.MaxInt64/2), 0)
	if err := p.Scan(&avrocodec.Row{}, body); !errors.Is(err, avrocodec.ErrBadValue) {
		t.Fatalf("a block of 2^62 booleans in 10 bytes: %v", err)
	}
}

// A record that contains itself (a tree) is refused at once with
// ErrUnsupportedSchema, by the projection and by the Parquet mapping: no
// compile that doubles at every level, no endless recursion.
func TestSelfContainingSchemas(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"Tree","fields":[
		{"name":"v","type":"long"},
		{"name":"left","type":["null","Tree"]},
		{"name":"right","type":["null","Tree"]},
		{"name":"kids","type":{"type":"array","items":"Tree"}}]}`)
	if _, err := avrocodec.NewProjection(s, nil, nil); !errors.Is(err, avrocodec.ErrUnsupportedSchema) {
		t.Fatalf("projection of a tree: %v", err)
	}
	if _, err := avrocodec.ArrowSchema(s); !errors.Is(err, avrocodec.ErrUnsupportedSchema) {
		t.Fatalf("Parquet mapping of a tree: %v", err)
	}
	// The same named type twice, not nested, is fine.
	twice := avro.MustParse(`{"type":"record","name":"Pair","fields":[
		{"name":"a","type":{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}},
		{"name":"b","type":"P"}]}`)
	if _, err := avrocodec.NewProjection(twice, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := avrocodec.ArrowSchema(twice); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaMappingErrors(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type":"record","name":"r","fields":[{"name":"u","type":["string","long"]}]}`, `field "u": union of "string", "long" has more than one non-null type`},
		{`{"type":"record","name":"r","fields":[{"name":"u","type":["null","string","long"]}]}`, `field "u": union of "string", "long"`},
		{`{"type":"record","name":"r","fields":[{"name":"n","type":"null"}]}`, `field "n"`},
		{`{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"array","items":["int","string"]}}]}`, `field "a[]"`},
		{`{"type":"record","name":"r","fields":[{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":60,"scale":2}}]}`, `field "d": decimal precision`},
		{`"string"`, `top level is string`},
	} {
		s, err := avro.Parse(c.schema)
		if err != nil {
			t.Fatal(err)
		}
		_, err = avrocodec.ArrowSchema(s)
		if !errors.Is(err, avrocodec.ErrUnsupportedSchema) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.schema, err, c.want)
		}
	}
}

// Scan reads the fields where they are and InTime, InValue and Map read
// them back as the generic decoder does.
func TestRowReadsFields(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"R","fields":[
		{"name":"s","type":"string"},
		{"name":"ts","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
		{"name":"n","type":"long"}]}`)
	out := avro.MustParse(`{"type":"record","name":"O","fields":[{"name":"count","type":"long"},{"name":"s","type":"string"}]}`)
	p, err := avrocodec.NewProjection(s, out, []int{2, 0})
	if err != nil {
		t.Fatal(err)
	}
	body := avrocodec.AppendString(nil, "hello")
	body = avrocodec.AppendLong(avrocodec.AppendLong(body, 1), 1_700_000_000_123_456)
	body = avrocodec.AppendLong(body, -3)
	var row avrocodec.Row
	if err := p.Scan(&row, body); err != nil {
		t.Fatal(err)
	}
	if got := string(row.Field(0)); got != "\x0ahello" {
		t.Fatalf("field 0: %q", got)
	}
	if row.Start(2) != row.Ends[1] || row.Ends[2] != len(body) {
		t.Fatalf("ends %v of %d bytes", row.Ends, len(body))
	}
	if tm, ok := row.InTime(1); !ok || tm.UnixMicro() != 1_700_000_000_123_456 {
		t.Fatalf("InTime: %v %v", tm, ok)
	}
	if _, ok := row.InTime(0); ok {
		t.Fatal("a string read as a time")
	}
	m, err := row.Map()
	if err != nil || m["count"] != int64(-3) || m["s"] != "hello" || len(m) != 2 {
		t.Fatalf("Map: %v %v", m, err)
	}
	if p.InIndex("n") != 2 || p.InIndex("count") != -1 {
		t.Fatal("InIndex")
	}
	if err := p.Scan(&row, body[:len(body)-1]); !errors.Is(err, avrocodec.ErrBadValue) || !strings.Contains(err.Error(), `field "n"`) {
		t.Fatalf("a cut record: %v", err)
	}
}
