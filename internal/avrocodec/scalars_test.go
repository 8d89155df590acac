package avrocodec

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
)

// codecCases: one Avro schema and one value (as hamba/avro encodes it) per
// row of the scalar table.
var codecCases = map[string]struct {
	schema string
	value  any
}{
	"logical:decimal":                {`{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, big.NewRat(-12345, 100)},
	"logical:uuid":                   {`{"type":"string","logicalType":"uuid"}`, "7b1e2b4e-3c1d-4f5a-9b6c-0d1e2f3a4b5c"},
	"logical:date":                   {`{"type":"int","logicalType":"date"}`, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
	"logical:time-millis":            {`{"type":"int","logicalType":"time-millis"}`, 3*time.Hour + 7*time.Millisecond},
	"logical:time-micros":            {`{"type":"long","logicalType":"time-micros"}`, 3*time.Hour + 7*time.Microsecond},
	"logical:timestamp-millis":       {`{"type":"long","logicalType":"timestamp-millis"}`, time.UnixMilli(1714568400123).UTC()},
	"logical:timestamp-micros":       {`{"type":"long","logicalType":"timestamp-micros"}`, time.UnixMicro(1714568400123456).UTC()},
	"logical:local-timestamp-millis": {`{"type":"long","logicalType":"local-timestamp-millis"}`, time.UnixMilli(1714568400123).UTC()},
	"logical:local-timestamp-micros": {`{"type":"long","logicalType":"local-timestamp-micros"}`, time.UnixMicro(1714568400123456).UTC()},
	"primitive:boolean":              {`"boolean"`, true},
	"primitive:int":                  {`"int"`, int32(-7)},
	"primitive:long":                 {`"long"`, int64(1) << 40},
	"primitive:float":                {`"float"`, float32(1.5)},
	"primitive:double":               {`"double"`, -2.25},
	"primitive:string":               {`"string"`, "Grüße"},
	"primitive:enum":                 {`{"type":"enum","name":"E","symbols":["A","B"]}`, "B"},
	"primitive:bytes":                {`"bytes"`, []byte{1, 2, 0xff}},
	"primitive:fixed":                {`{"type":"fixed","name":"F","size":2}`, [2]byte{1, 2}},
}

// The scalar table drives both walks over Avro binary — the scan compile
// (compileScan) and the value-column compile (compileCol) — and the map
// path's appenders: a row without one of those columns fails here, and a
// row whose columns disagree (the bytes decoded into a column differ from
// the generic value appended) fails too. Each row is tried plain, in a
// ["null", T] union, and as null.
func TestScalarTableDrivesBothWalks(t *testing.T) {
	for _, name := range ScalarNames() {
		var sc Scalar
		if lt, ok := strings.CutPrefix(name, "logical:"); ok {
			sc = logicalScalars[avro.LogicalType(lt)]
		} else if pt, ok := strings.CutPrefix(name, "primitive:"); ok {
			sc = primitiveScalars[avro.Type(pt)]
		}
		missing := ""
		for col, set := range map[string]bool{"arrow": sc.arrow != nil, "scan": sc.scan != nil, "column": sc.column != nil, "append": sc.append != nil} {
			if !set {
				missing += " " + col
			}
		}
		if missing != "" {
			t.Errorf("%s: the row has no%s", name, missing)
			continue
		}
		c, ok := codecCases[name]
		if !ok {
			t.Errorf("%s has a row but no case in codecCases", name)
			continue
		}
		plain := avro.MustParse(fmt.Sprintf(`{"type":"record","name":"R","fields":[{"name":"f","type":%s}]}`, c.schema))
		body, err := avro.Marshal(plain, map[string]any{"f": c.value})
		if err != nil {
			t.Fatalf("%s: encoding the case: %v", name, err)
		}
		nullable := avro.MustParse(fmt.Sprintf(`{"type":"record","name":"R","fields":[{"name":"f","type":["null",%s]}]}`, c.schema))
		for _, tc := range []struct {
			what   string
			schema avro.Schema
			body   []byte
		}{
			{"plain", plain, body},
			{"nullable", nullable, append([]byte{2}, body...)}, // union index 1
			{"null", nullable, []byte{0}},
		} {
			bothWalks(t, name+" "+tc.what, tc.schema, tc.body)
		}
	}
}

// bothWalks scans body, decodes it into Arrow columns, appends the generic
// decoder's value of it by the map path, and compares the two columns.
func bothWalks(t *testing.T, what string, s avro.Schema, body []byte) {
	t.Helper()
	p, err := NewProjection(s, nil, nil)
	if err != nil {
		t.Fatalf("%s: projection: %v", what, err)
	}
	var row Row
	if err := p.Scan(&row, body); err != nil {
		t.Fatalf("%s: scan: %v", what, err)
	}
	if row.Ends[0] != len(body) {
		t.Fatalf("%s: the scan ends at %d of %d bytes", what, row.Ends[0], len(body))
	}
	as, err := ArrowSchema(s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	byCol := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer byCol.Release()
	cols, err := NewColumns(p, byCol.Fields())
	if err != nil {
		t.Fatalf("%s: columns: %v", what, err)
	}
	if err := cols.Check(&row); err != nil {
		t.Fatalf("%s: check: %v", what, err)
	}
	cols.Append(&row)
	byMap := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer byMap.Release()
	apps, err := NewAppenders(p.Out, byMap.Fields())
	if err != nil {
		t.Fatalf("%s: appenders: %v", what, err)
	}
	m, err := row.Map()
	if err != nil {
		t.Fatalf("%s: generic decode: %v", what, err)
	}
	if err := apps.Append(m); err != nil {
		t.Fatalf("%s: append %v: %v", what, m, err)
	}
	a, b := byCol.NewRecordBatch(), byMap.NewRecordBatch()
	defer a.Release()
	defer b.Release()
	if a.NumRows() != 1 || !array.RecordEqual(a, b) {
		t.Fatalf("%s: the column walk gives %v, the map path %v", what, a.Column(0), b.Column(0))
	}
	if as.Field(0).Type.ID() != arrow.STRING {
		return
	}
	// A text column decodes into a StringDict too (the scalar's dict
	// decoder), to the same values.
	byDict := array.NewRecordBuilder(memory.DefaultAllocator, as)
	defer byDict.Release()
	d := NewStringDict(memory.DefaultAllocator, byDict.Field(0).(*array.StringBuilder), 0)
	defer d.Release()
	dcols, err := NewColumnsDict(p, byDict.Fields(), []*StringDict{d})
	if err != nil {
		t.Fatalf("%s: a text column into a dictionary: %v", what, err)
	}
	dcols.Append(&row)
	da := d.NewArray()
	if da == nil {
		t.Fatalf("%s: the dictionary gave up on one value", what)
	}
	defer da.Release()
	if got := dictStrings(da); len(got) != 1 || got[0] != stringsOf(a.Column(0))[0] {
		t.Fatalf("%s: the dictionary walk gives %v, the column walk %v", what, got, a.Column(0))
	}
}

// dictStrings is a dictionary array's values row by row (nil for a null).
func dictStrings(d *array.Dictionary) []any {
	vals := d.Dictionary().(*array.String)
	out := make([]any, d.Len())
	for i := range out {
		if d.IsValid(i) {
			out[i] = vals.Value(d.GetValueIndex(i))
		}
	}
	return out
}

// stringsOf is a string array's values row by row (nil for a null).
func stringsOf(a arrow.Array) []any {
	s := a.(*array.String)
	out := make([]any, s.Len())
	for i := range out {
		if s.IsValid(i) {
			out[i] = s.Value(i)
		}
	}
	return out
}
