package format

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

// scalar is everything the formats know about one Avro scalar type (a
// primitive, or a logical type over one): its Arrow type (Parquet), the
// appender that puts a Go value into an Arrow builder, the normalization to
// the Go type the Avro encoder takes, and the JSON-lines rendering. The
// structural types (record, array, map, union) are handled where they
// recurse; a new scalar or logical type is one row of the tables below.
type scalar struct {
	// arrow is the Arrow type of s.
	arrow func(s avro.Schema, path string) (arrow.DataType, error)
	// append builds the appender of values into a builder of dt (the type
	// arrow returned).
	append func(dt arrow.DataType, path string) appendFn
	// normalize converts a non-nil value for the Avro encoder; nil: as is.
	normalize func(s avro.Schema, v any, path string) (any, error)
	// json converts a value for JSON lines; nil: it marshals as it is.
	json func(s avro.Schema, path string) jsonFn
}

// logicalScalars win over the primitive they annotate (uuid only on string).
var logicalScalars = map[avro.LogicalType]scalar{
	avro.Decimal:              {arrow: decimalArrow, append: appendDecimal, normalize: normalizeDecimal, json: jsonDecimal},
	avro.UUID:                 {arrow: fixedArrow(extensions.NewUUIDType()), append: appendUUID},
	avro.Date:                 {arrow: fixedArrow(arrow.FixedWidthTypes.Date32), append: appendDate, normalize: normalizeDate, json: jsonDate},
	avro.TimeMillis:           {arrow: fixedArrow(arrow.FixedWidthTypes.Time32ms), append: appendTime32, normalize: normalizeTimeOfDay(time.Millisecond)},
	avro.TimeMicros:           {arrow: fixedArrow(arrow.FixedWidthTypes.Time64us), append: appendTime64, normalize: normalizeTimeOfDay(time.Microsecond)},
	avro.TimestampMillis:      {arrow: fixedArrow(&arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}), append: appendTimestamp, normalize: normalizeTimestamp(time.Millisecond), json: jsonTimestamp},
	avro.TimestampMicros:      {arrow: fixedArrow(&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}), append: appendTimestamp, normalize: normalizeTimestamp(time.Microsecond), json: jsonTimestamp},
	avro.LocalTimestampMillis: {arrow: fixedArrow(&arrow.TimestampType{Unit: arrow.Millisecond}), append: appendTimestamp, normalize: normalizeTimestamp(time.Millisecond), json: jsonTimestamp},
	avro.LocalTimestampMicros: {arrow: fixedArrow(&arrow.TimestampType{Unit: arrow.Microsecond}), append: appendTimestamp, normalize: normalizeTimestamp(time.Microsecond), json: jsonTimestamp},
}

var primitiveScalars = map[avro.Type]scalar{
	avro.Boolean: {arrow: fixedArrow(arrow.FixedWidthTypes.Boolean), append: appendBool},
	avro.Int:     {arrow: fixedArrow(arrow.PrimitiveTypes.Int32), append: appendInt32, normalize: normalizeInt},
	avro.Long:    {arrow: fixedArrow(arrow.PrimitiveTypes.Int64), append: appendInt64, normalize: normalizeLong},
	avro.Float:   {arrow: fixedArrow(arrow.PrimitiveTypes.Float32), append: appendFloat32, normalize: normalizeFloat},
	avro.Double:  {arrow: fixedArrow(arrow.PrimitiveTypes.Float64), append: appendFloat64, normalize: normalizeDouble},
	avro.String:  {arrow: fixedArrow(arrow.BinaryTypes.String), append: appendString},
	avro.Enum:    {arrow: fixedArrow(arrow.BinaryTypes.String), append: appendString},
	avro.Bytes:   {arrow: fixedArrow(arrow.BinaryTypes.Binary), append: appendBinary, normalize: normalizeBytes},
	avro.Fixed:   {arrow: fixedSizeArrow, append: appendFixed, normalize: normalizeFixed, json: jsonFixed},
}

// scalarOf returns the row for s (dereferenced, not a union), or false for
// a record, array, map, null or an unknown type.
func scalarOf(s avro.Schema) (scalar, bool) {
	if ls := logicalOf(s); ls != nil {
		if sc, ok := logicalScalars[ls.Type()]; ok && (ls.Type() != avro.UUID || s.Type() == avro.String) {
			return sc, true
		}
	}
	sc, ok := primitiveScalars[s.Type()]
	return sc, ok
}

// Arrow types.

func fixedArrow(dt arrow.DataType) func(avro.Schema, string) (arrow.DataType, error) {
	return func(avro.Schema, string) (arrow.DataType, error) { return dt, nil }
}

func fixedSizeArrow(s avro.Schema, _ string) (arrow.DataType, error) {
	return &arrow.FixedSizeBinaryType{ByteWidth: s.(*avro.FixedSchema).Size()}, nil
}

func decimalArrow(s avro.Schema, path string) (arrow.DataType, error) {
	d, _ := logicalOf(s).(*avro.DecimalLogicalSchema)
	if d == nil || d.Precision() < 1 || d.Precision() > 38 {
		return nil, fmt.Errorf("%w: field %q: decimal precision must be 1..38", ErrUnsupportedSchema, path)
	}
	return &arrow.Decimal128Type{Precision: int32(d.Precision()), Scale: int32(d.Scale())}, nil
}

// Appenders.

func appendBool(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		x, ok := v.(bool)
		if !ok {
			return badValue(path, v, "boolean")
		}
		b.(*array.BooleanBuilder).Append(x)
		return nil
	}
}

func appendInt32(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		n, ok := toInt64(v)
		if !ok || n != int64(int32(n)) {
			return badValue(path, v, "int (32-bit)")
		}
		b.(*array.Int32Builder).Append(int32(n))
		return nil
	}
}

func appendInt64(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		n, ok := toInt64(v)
		if !ok {
			return badValue(path, v, "long")
		}
		b.(*array.Int64Builder).Append(n)
		return nil
	}
}

func appendFloat32(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		f, ok := toFloat64(v)
		if !ok {
			return badValue(path, v, "float")
		}
		b.(*array.Float32Builder).Append(float32(f))
		return nil
	}
}

func appendFloat64(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		f, ok := toFloat64(v)
		if !ok {
			return badValue(path, v, "double")
		}
		b.(*array.Float64Builder).Append(f)
		return nil
	}
}

func appendString(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		x, ok := v.(string)
		if !ok {
			return badValue(path, v, "string")
		}
		b.(*array.StringBuilder).Append(x)
		return nil
	}
}

func appendBinary(_ arrow.DataType, path string) appendFn {
	return func(b array.Builder, v any) error {
		x, ok := toBytes(v)
		if !ok {
			return badValue(path, v, "bytes")
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
			return badValue(path, v, fmt.Sprintf("fixed(%d)", width))
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
			return badValue(path, v, fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale))
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
				return badValue(path, v, "date")
			}
			b.(*array.Date32Builder).Append(arrow.Date32(tm.Unix() / 86400))
			return nil
		}
		n, ok := toInt64(v)
		if !ok {
			return badValue(path, v, "date")
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
			return badValue(path, v, "time-millis")
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
			return badValue(path, v, "time-micros")
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
			return badValue(path, v, "timestamp")
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
				return badValue(path, v, "uuid")
			}
			copy(id[:], raw)
		}
		if err != nil {
			return badValue(path, v, "uuid")
		}
		b.(*extensions.UUIDBuilder).Append(id)
		return nil
	}
}

// Normalizers (for the Avro encoder).

func normalizeDecimal(s avro.Schema, v any, path string) (any, error) {
	d := logicalOf(s).(*avro.DecimalLogicalSchema)
	if _, ok := v.(*big.Rat); ok {
		return v, nil
	}
	u, ok := toUnscaled(v, int32(d.Scale()))
	if !ok {
		return nil, badValue(path, v, "decimal")
	}
	return new(big.Rat).SetFrac(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)), nil
}

func normalizeTimestamp(unit time.Duration) func(avro.Schema, any, string) (any, error) {
	return func(_ avro.Schema, v any, path string) (any, error) {
		t, ok := toTime(v, unit)
		if !ok {
			return nil, badValue(path, v, "timestamp")
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
			return nil, badValue(path, v, "date")
		}
		return t, nil
	}
	n, ok := toInt64(v)
	if !ok {
		return nil, badValue(path, v, "date")
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
		return nil, badValue(path, v, "int")
	}
	return int32(n), nil
}

func normalizeLong(_ avro.Schema, v any, path string) (any, error) {
	n, ok := toInt64(v)
	if !ok {
		return nil, badValue(path, v, "long")
	}
	return n, nil
}

func normalizeFloat(_ avro.Schema, v any, path string) (any, error) {
	f, ok := toFloat64(v)
	if !ok {
		return nil, badValue(path, v, "float")
	}
	return float32(f), nil
}

func normalizeDouble(_ avro.Schema, v any, path string) (any, error) {
	f, ok := toFloat64(v)
	if !ok {
		return nil, badValue(path, v, "double")
	}
	return f, nil
}

func normalizeBytes(_ avro.Schema, v any, path string) (any, error) {
	if b, ok := toBytes(v); ok {
		return b, nil
	}
	return nil, badValue(path, v, "bytes")
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
		return nil, badValue(path, v, fmt.Sprintf("fixed(%d)", n))
	}
	arr := reflect.New(reflect.ArrayOf(n, reflect.TypeFor[byte]())).Elem()
	reflect.Copy(arr, reflect.ValueOf(b))
	return arr.Interface(), nil
}

// JSON renderings.

func jsonDecimal(s avro.Schema, path string) jsonFn {
	scale := int32(logicalOf(s).(*avro.DecimalLogicalSchema).Scale())
	return func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		u, ok := toUnscaled(v, scale)
		if !ok {
			return nil, badValue(path, v, "decimal")
		}
		return json.Number(ratString(u, scale)), nil
	}
}

func jsonDate(avro.Schema, string) jsonFn {
	return func(v any) (any, error) {
		if t, ok := v.(time.Time); ok {
			return t.Format(time.DateOnly), nil
		}
		return v, nil
	}
}

func jsonTimestamp(avro.Schema, string) jsonFn {
	return func(v any) (any, error) {
		if t, ok := v.(time.Time); ok {
			return t.UTC().Format(time.RFC3339Nano), nil
		}
		return v, nil
	}
}

func jsonFixed(avro.Schema, string) jsonFn {
	return func(v any) (any, error) {
		if b, ok := toBytes(v); ok {
			return b, nil
		}
		return v, nil
	}
}
