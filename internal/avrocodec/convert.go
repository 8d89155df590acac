package avrocodec

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// The map path's columns of the scalar table: generic Go values (what
// hamba/avro or encoding/json decode) into Arrow builders, into the Go
// types the Avro encoder takes, into JSON.

// Appenders.

func appendBool(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		x, ok := v.(bool)
		if !ok {
			return BadValue(path, v, "boolean")
		}
		b.(*array.BooleanBuilder).Append(x)
		return nil
	}
}

func appendInt32(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		n, ok := toInt64(v)
		if !ok || n != int64(int32(n)) {
			return BadValue(path, v, "int (32-bit)")
		}
		b.(*array.Int32Builder).Append(int32(n))
		return nil
	}
}

func appendInt64(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		n, ok := toInt64(v)
		if !ok {
			return BadValue(path, v, "long")
		}
		b.(*array.Int64Builder).Append(n)
		return nil
	}
}

func appendFloat32(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		f, ok := toFloat64(v)
		if !ok {
			return BadValue(path, v, "float")
		}
		b.(*array.Float32Builder).Append(float32(f))
		return nil
	}
}

func appendFloat64(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		f, ok := toFloat64(v)
		if !ok {
			return BadValue(path, v, "double")
		}
		b.(*array.Float64Builder).Append(f)
		return nil
	}
}

func appendString(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		x, ok := v.(string)
		if !ok {
			return BadValue(path, v, "string")
		}
		b.(*array.StringBuilder).Append(x)
		return nil
	}
}

func appendBinary(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		x, ok := toBytes(v)
		if !ok {
			return BadValue(path, v, "bytes")
		}
		b.(*array.BinaryBuilder).Append(x)
		return nil
	}
}

func appendFixed(dt arrow.DataType, path string) appendFn {
	width := dt.(*arrow.FixedSizeBinaryType).ByteWidth
	return func(b array.Builder, v any) error {
		x, ok := toBytes(v)
		if !ok || len(x) != width {
			return BadValue(path, v, fmt.Sprintf("fixed(%d)", width))
		}
		b.(*array.FixedSizeBinaryBuilder).Append(x)
		return nil
	}
}

func appendDecimal(dt arrow.DataType, path string) appendFn {
	t := dt.(*arrow.Decimal128Type)
	return func(b array.Builder, v any) error {
		u, ok := toUnscaled(v, t.Scale)
		if !ok || u.BitLen() > 126 {
			return BadValue(path, v, fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale))
		}
		b.(*array.Decimal128Builder).Append(decimal128.FromBigInt(u))
		return nil
	}
}

func appendDate(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		if tm, ok := v.(time.Time); ok {
			y, m, d := tm.Date()
			days := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
			b.(*array.Date32Builder).Append(arrow.Date32(days))
			return nil
		}
		if s, ok := v.(string); ok {
			tm, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return BadValue(path, v, "date")
			}
			b.(*array.Date32Builder).Append(arrow.Date32(tm.Unix() / 86400))
			return nil
		}
		n, ok := toInt64(v)
		if !ok {
			return BadValue(path, v, "date")
		}
		b.(*array.Date32Builder).Append(arrow.Date32(n))
		return nil
	}
}

func appendTime32(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		if d, ok := v.(time.Duration); ok {
			b.(*array.Time32Builder).Append(arrow.Time32(d.Milliseconds()))
			return nil
		}
		n, ok := toInt64(v)
		if !ok {
			return BadValue(path, v, "time-millis")
		}
		b.(*array.Time32Builder).Append(arrow.Time32(n))
		return nil
	}
}

func appendTime64(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		if d, ok := v.(time.Duration); ok {
			b.(*array.Time64Builder).Append(arrow.Time64(d.Microseconds()))
			return nil
		}
		n, ok := toInt64(v)
		if !ok {
			return BadValue(path, v, "time-micros")
		}
		b.(*array.Time64Builder).Append(arrow.Time64(n))
		return nil
	}
}

func appendTimestamp(dt arrow.DataType, path string) appendFn {
	unit := time.Millisecond
	if dt.(*arrow.TimestampType).Unit == arrow.Microsecond {
		unit = time.Microsecond
	}
	return func(b array.Builder, v any) error {
		tm, ok := toTime(v, unit)
		if !ok {
			return BadValue(path, v, "timestamp")
		}
		var n int64
		if unit == time.Millisecond {
			n = tm.UnixMilli()
		} else {
			n = tm.UnixMicro()
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(n))
		return nil
	}
}

func appendUUID(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		var id uuid.UUID
		var err error
		switch x := v.(type) {
		case string:
			id, err = uuid.Parse(x)
		case uuid.UUID:
			id = x
		default:
			raw, ok := toBytes(v)
			if !ok || len(raw) != 16 {
				return BadValue(path, v, "uuid")
			}
			copy(id[:], raw)
		}
		if err != nil {
			return BadValue(path, v, "uuid")
		}
		b.(*extensions.UUIDBuilder).Append(id)
		return nil
	}
}

// Normalizers (for the Avro encoder).

func normalizeDecimal(s avro.Schema, v any, path string) (any, error) {
	d := Logical(s).(*avro.DecimalLogicalSchema)
	if _, ok := v.(*big.Rat); ok {
		return v, nil
	}
	u, ok := toUnscaled(v, int32(d.Scale()))
	if !ok {
		return nil, BadValue(path, v, "decimal")
	}
	return new(big.Rat).SetFrac(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)), nil
}

func normalizeTimestamp(unit time.Duration) func(avro.Schema, any, string) (any, error) {
	return func(_ avro.Schema, v any, path string) (any, error) {
		t, ok := toTime(v, unit)
		if !ok {
			return nil, BadValue(path, v, "timestamp")
		}
		return t, nil
	}
}

func normalizeDate(_ avro.Schema, v any, path string) (any, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case string:
		t, err := time.Parse(time.DateOnly, x)
		if err != nil {
			return nil, BadValue(path, v, "date")
		}
		return t, nil
	}
	n, ok := toInt64(v)
	if !ok {
		return nil, BadValue(path, v, "date")
	}
	return time.Unix(n*86400, 0).UTC(), nil
}

func normalizeTimeOfDay(unit time.Duration) func(avro.Schema, any, string) (any, error) {
	return func(_ avro.Schema, v any, _ string) (any, error) {
		if n, ok := toInt64(v); ok {
			if _, isDur := v.(time.Duration); !isDur {
				return time.Duration(n) * unit, nil
			}
		}
		return v, nil
	}
}

func normalizeInt(_ avro.Schema, v any, path string) (any, error) {
	n, ok := toInt64(v)
	if !ok || n != int64(int32(n)) {
		return nil, BadValue(path, v, "int")
	}
	return int32(n), nil
}

func normalizeLong(_ avro.Schema, v any, path string) (any, error) {
	n, ok := toInt64(v)
	if !ok {
		return nil, BadValue(path, v, "long")
	}
	return n, nil
}

func normalizeFloat(_ avro.Schema, v any, path string) (any, error) {
	f, ok := toFloat64(v)
	if !ok {
		return nil, BadValue(path, v, "float")
	}
	return float32(f), nil
}

func normalizeDouble(_ avro.Schema, v any, path string) (any, error) {
	f, ok := toFloat64(v)
	if !ok {
		return nil, BadValue(path, v, "double")
	}
	return f, nil
}

func normalizeBytes(_ avro.Schema, v any, path string) (any, error) {
	if b, ok := toBytes(v); ok {
		return b, nil
	}
	return nil, BadValue(path, v, "bytes")
}

// normalizeFixed turns bytes of the right size into the [n]byte array the
// encoder takes for a fixed(n).
func normalizeFixed(s avro.Schema, v any, path string) (any, error) {
	n := s.(*avro.FixedSchema).Size()
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Len() == n && rv.Type().Elem().Kind() == reflect.Uint8 {
		return v, nil
	}
	b, ok := toBytes(v)
	if !ok || len(b) != n {
		return nil, BadValue(path, v, fmt.Sprintf("fixed(%d)", n))
	}
	arr := reflect.New(reflect.ArrayOf(n, reflect.TypeFor[byte]())).Elem()
	reflect.Copy(arr, reflect.ValueOf(b))
	return arr.Interface(), nil
}

// JSON renderings.

func jsonDecimal(s avro.Schema, path string) JSONFn {
	scale := int32(Logical(s).(*avro.DecimalLogicalSchema).Scale())
	return func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		u, ok := toUnscaled(v, scale)
		if !ok {
			return nil, BadValue(path, v, "decimal")
		}
		return json.Number(ratString(u, scale)), nil
	}
}

func jsonDate(avro.Schema, string) JSONFn {
	return func(v any) (any, error) {
		if t, ok := v.(time.Time); ok {
			return t.Format(time.DateOnly), nil
		}
		return v, nil
	}
}

func jsonTimestamp(avro.Schema, string) JSONFn {
	return func(v any) (any, error) {
		if t, ok := v.(time.Time); ok {
			return t.UTC().Format(time.RFC3339Nano), nil
		}
		return v, nil
	}
}

func jsonFixed(avro.Schema, string) JSONFn {
	return func(v any) (any, error) {
		if b, ok := toBytes(v); ok {
			return b, nil
		}
		return v, nil
	}
}
