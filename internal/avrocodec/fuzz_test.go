package avrocodec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
)

// everyScalar is a record with a field per row of the scalar table, plain
// and in a union with null, and the table's rows in an array and a map:
// the schema of FuzzScanThenColumns, made from codecCases.
func everyScalar(t testing.TB) (avro.Schema, map[string]any) {
	var fields []string
	value := map[string]any{}
	for k, name := range ScalarNames() {
		c := codecCases[name]
		typ := c.schema
		if strings.Contains(typ, `"name":`) { // a named type: defined once
			typ = strings.Replace(typ, `"name":"`, fmt.Sprintf(`"name":"N%d`, k), 1)
		}
		fields = append(fields, fmt.Sprintf(`{"name":"f%d","type":%s}`, k, typ),
			fmt.Sprintf(`{"name":"n%d","type":["null",%s]}`, k, strings.ReplaceAll(typ, `"name":"N`, `"name":"M`)))
		value[fmt.Sprintf("f%d", k)] = c.value
		value[fmt.Sprintf("n%d", k)] = nil
	}
	fields = append(fields, `{"name":"arr","type":{"type":"array","items":["null","long"]}}`,
		`{"name":"m","type":{"type":"map","values":{"type":"record","name":"V","fields":[{"name":"x","type":"int"}]}}}`)
	value["arr"] = []any{nil, int64(3)}
	value["m"] = map[string]any{"a": map[string]any{"x": 1}, "b": map[string]any{"x": 2}}
	s, err := avro.Parse(`{"type":"record","name":"All","fields":[` + strings.Join(fields, ",") + `]}`)
	if err != nil {
		t.Fatal(err)
	}
	return s, value
}

// Any bytes: a scan never panics, refuses with ErrBadValue only, and what
// it accepts the column decoders take without panicking (they check
// nothing themselves: a panic there would be a scan that accepted too
// much), one value a column.
func FuzzScanThenColumns(f *testing.F) {
	s, value := everyScalar(f)
	seed, err := avro.Marshal(s, value)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(append([]byte{0xff, 0xff}, seed...))
	p, err := NewProjection(s, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	as, err := ArrowSchema(s)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var row Row
		if err := p.Scan(&row, body); err != nil {
			if !errors.Is(err, ErrBadValue) {
				t.Fatalf("scan error %v does not wrap ErrBadValue", err)
			}
			return
		}
		rb := array.NewRecordBuilder(memory.DefaultAllocator, as)
		defer rb.Release()
		cols, err := NewColumns(p, rb.Fields())
		if err != nil {
			t.Fatal(err)
		}
		if err := cols.Check(&row); err != nil {
			if !errors.Is(err, ErrBadValue) {
				t.Fatalf("check error %v does not wrap ErrBadValue", err)
			}
			return
		}
		cols.Append(&row)
		rec := rb.NewRecordBatch()
		defer rec.Release()
		if rec.NumRows() != 1 {
			t.Fatalf("%d rows", rec.NumRows())
		}
		for i, c := range rec.Columns() {
			if c.Len() != 1 {
				t.Fatalf("column %s has %d values", as.Field(i).Name, c.Len())
			}
		}
	})
}
