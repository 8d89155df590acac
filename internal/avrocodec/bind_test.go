package avrocodec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
)

// The fast paths of bindAppender give what the generic appenders give.
func TestBindAppenderFastPathMatchesGeneric(t *testing.T) {
	cases := []struct {
		avro string
		dt   arrow.DataType
		fast any
		slow []any
	}{
		{`"long"`, arrow.PrimitiveTypes.Int64, int64(7), []any{7, float64(7), json.Number("7")}},
		{`"int"`, arrow.PrimitiveTypes.Int32, int32(7), []any{int64(7), float64(7)}},
		{`"double"`, arrow.PrimitiveTypes.Float64, 1.5, []any{json.Number("1.5"), float32(1.5)}},
		{`"boolean"`, arrow.FixedWidthTypes.Boolean, true, nil},
		{`"string"`, arrow.BinaryTypes.String, "x", nil},
		{`{"type":"long","logicalType":"timestamp-micros"}`, &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
			time.UnixMicro(1714566600123456), []any{int64(1714566600123456), "2024-05-01T12:30:00.123456Z"}},
		{`{"type":"long","logicalType":"timestamp-millis"}`, &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"},
			time.UnixMilli(1714566600123), []any{int64(1714566600123), "2024-05-01T12:30:00.123Z"}},
	}
	for _, c := range cases {
		s := avro.MustParse(c.avro)
		fn, err := compile(s, c.dt, true, "f")
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewBuilder(memory.DefaultAllocator, c.dt)
		put := bindAppender(b, fn)
		for _, v := range append([]any{c.fast, nil}, c.slow...) {
			if err := put(v); err != nil {
				t.Fatalf("%s: %v: %v", c.avro, v, err)
			}
		}
		if err := put(struct{}{}); err == nil {
			t.Errorf("%s: a struct{} was accepted", c.avro)
		}
		a := b.NewArray()
		if a.IsValid(1) || a.NullN() != 1 {
			t.Errorf("%s: nil did not append a null", c.avro)
		}
		for i := 2; i < a.Len(); i++ {
			if a.ValueStr(i) != a.ValueStr(0) {
				t.Errorf("%s: value %d is %s, the fast path gave %s", c.avro, i, a.ValueStr(i), a.ValueStr(0))
			}
		}
		a.Release()
		b.Release()
	}
}
