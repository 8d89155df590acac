package format

import (
	"bytes"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// scalarCases: one Avro schema and one value per row of the scalar table
// (avrocodec.ScalarNames).
// A row without a case fails TestEveryScalarRowWritesEverywhere, so a new
// type comes with its test.
var scalarCases = map[string]struct {
	schema string
	value  any
}{
	"logical:decimal":                {`{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}`, big.NewRat(12345, 100)},
	"logical:uuid":                   {`{"type":"string","logicalType":"uuid"}`, "7b1e2b4e-3c1d-4f5a-9b6c-0d1e2f3a4b5c"},
	"logical:date":                   {`{"type":"int","logicalType":"date"}`, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
	"logical:time-millis":            {`{"type":"int","logicalType":"time-millis"}`, 3 * time.Hour},
	"logical:time-micros":            {`{"type":"long","logicalType":"time-micros"}`, 3 * time.Hour},
	"logical:timestamp-millis":       {`{"type":"long","logicalType":"timestamp-millis"}`, time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)},
	"logical:timestamp-micros":       {`{"type":"long","logicalType":"timestamp-micros"}`, time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)},
	"logical:local-timestamp-millis": {`{"type":"long","logicalType":"local-timestamp-millis"}`, time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)},
	"logical:local-timestamp-micros": {`{"type":"long","logicalType":"local-timestamp-micros"}`, time.Date(2024, 5, 1, 13, 0, 0, 0, time.UTC)},
	"primitive:boolean":              {`"boolean"`, true},
	"primitive:int":                  {`"int"`, float64(7)}, // as decoded from JSON
	"primitive:long":                 {`"long"`, float64(7)},
	"primitive:float":                {`"float"`, 1.5},
	"primitive:double":               {`"double"`, 1.5},
	"primitive:string":               {`"string"`, "x"},
	"primitive:enum":                 {`{"type":"enum","name":"E","symbols":["A","B"]}`, "B"},
	"primitive:bytes":                {`"bytes"`, []byte{1, 2}},
	"primitive:fixed":                {`{"type":"fixed","name":"F","size":2}`, []byte{1, 2}},
}

// TestEveryScalarRowWritesEverywhere: every row of the scalar tables maps
// to Arrow and writes a value, plain and nullable, to Parquet, Avro and JSON
// lines: one row is all a type needs.
func TestEveryScalarRowWritesEverywhere(t *testing.T) {
	for _, key := range avrocodec.ScalarNames() {
		c, ok := scalarCases[key]
		if !ok {
			t.Errorf("%s has a row but no case in scalarCases", key)
			continue
		}
		for _, nullable := range []bool{false, true} {
			typ := c.schema
			if nullable {
				typ = `["null",` + typ + `]`
			}
			schema, err := avro.Parse(fmt.Sprintf(`{"type":"record","name":"R","fields":[{"name":"f","type":%s}]}`, typ))
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if _, err := avrocodec.ArrowSchema(schema); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			for _, kind := range []Kind{Parquet, Avro, JSONLines} {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, schema, Options{Kind: kind})
				if err != nil {
					t.Fatalf("%s %s: %v", key, kind, err)
				}
				if err := w.Write(map[string]any{"f": c.value}, Meta{}); err != nil {
					t.Fatalf("%s (nullable %v) %s: %v", key, nullable, kind, err)
				}
				if err := w.Close(); err != nil || buf.Len() == 0 {
					t.Fatalf("%s %s: close: %v, %d bytes", key, kind, err, buf.Len())
				}
			}
		}
	}
}
