package avrocodec

import (
	"fmt"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/hamba/avro/v2"
)

// Scalar is everything the codec and the file formats know about one Avro
// scalar type (a primitive, or a logical type over one), for both record
// paths: the bytes path (scan, strict, column: Avro binary checked, then
// decoded into an Arrow builder) and the map path (append, Normalize,
// JSON: generic Go values). The structural types (record, array, map,
// union) are handled where the walks recurse; a new scalar or logical type
// is one row of the tables below, and TestScalarTableDrivesBothWalks fails
// on a row that lacks a column.
type Scalar struct {
	// arrow is the Arrow type of s (how Parquet stores it).
	arrow func(s avro.Schema, path string) (arrow.DataType, error)
	// scan checks one value of s in Avro binary.
	scan func(s avro.Schema) scanFn
	// strict, if not nil, checks a value as scan does and also that
	// Parquet can hold it (a decimal of at most 38 digits, a uuid that
	// parses); the Avro output copies such values as they are.
	strict func(s avro.Schema, path string) (scanFn, error)
	// column decodes one value of s that scan accepted into a builder of
	// the type arrow returned.
	column func(s avro.Schema, bld array.Builder, path string) (colFn, error)
	// dict, for a text type (Arrow string), decodes one value as column
	// does but into a StringDict: a top-level text column of the Parquet
	// writer, kept dictionary-encoded. nil for the other types.
	dict func(s avro.Schema, d *StringDict) colFn
	// append builds the appender of generic values into a builder of dt
	// (the type arrow returned).
	append func(dt arrow.DataType, path string) appendFn
	// Normalize converts a non-nil generic value to the Go type the Avro
	// encoder takes; nil: the value goes as it is.
	Normalize func(s avro.Schema, v any, path string) (any, error)
	// JSON converts a value for JSON lines; nil: it marshals as it is.
	JSON func(s avro.Schema, path string) JSONFn
}

// JSONFn turns one value into its JSON-friendly form.
type JSONFn func(v any) (any, error)

var (
	timestampMillis      = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	timestampMicros      = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	localTimestampMillis = &arrow.TimestampType{Unit: arrow.Millisecond}
	localTimestampMicros = &arrow.TimestampType{Unit: arrow.Microsecond}
)

// logicalScalars win over the primitive they annotate (uuid only on string).
var logicalScalars = map[avro.LogicalType]Scalar{
	avro.Decimal: {arrow: decimalArrow, scan: scanPrimitive, strict: strictDecimal, column: colDecimal,
		append: appendDecimal, Normalize: normalizeDecimal, JSON: jsonDecimal},
	avro.UUID: {arrow: fixedArrow(extensions.NewUUIDType()), scan: scanPrimitive, strict: strictUUID, column: colUUID,
		append: appendUUID},
	avro.Date: {arrow: fixedArrow(arrow.FixedWidthTypes.Date32), scan: scanPrimitive, column: colDate,
		append: appendDate, Normalize: normalizeDate, JSON: jsonDate},
	avro.TimeMillis: {arrow: fixedArrow(arrow.FixedWidthTypes.Time32ms), scan: scanPrimitive, column: colTime32,
		append: appendTime32, Normalize: normalizeTimeOfDay(time.Millisecond)},
	avro.TimeMicros: {arrow: fixedArrow(arrow.FixedWidthTypes.Time64us), scan: scanPrimitive, column: colTime64,
		append: appendTime64, Normalize: normalizeTimeOfDay(time.Microsecond)},
	avro.TimestampMillis: {arrow: fixedArrow(timestampMillis), scan: scanPrimitive, column: colTimestamp,
		append: appendTimestamp, Normalize: normalizeTimestamp(time.Millisecond), JSON: jsonTimestamp},
	avro.TimestampMicros: {arrow: fixedArrow(timestampMicros), scan: scanPrimitive, column: colTimestamp,
		append: appendTimestamp, Normalize: normalizeTimestamp(time.Microsecond), JSON: jsonTimestamp},
	avro.LocalTimestampMillis: {arrow: fixedArrow(localTimestampMillis), scan: scanPrimitive, column: colTimestamp,
		append: appendTimestamp, Normalize: normalizeTimestamp(time.Millisecond), JSON: jsonTimestamp},
	avro.LocalTimestampMicros: {arrow: fixedArrow(localTimestampMicros), scan: scanPrimitive, column: colTimestamp,
		append: appendTimestamp, Normalize: normalizeTimestamp(time.Microsecond), JSON: jsonTimestamp},
}

var primitiveScalars = map[avro.Type]Scalar{
	avro.Boolean: {arrow: fixedArrow(arrow.FixedWidthTypes.Boolean), scan: scanBoolean, column: colBoolean,
		append: appendBool},
	avro.Int: {arrow: fixedArrow(arrow.PrimitiveTypes.Int32), scan: scanInt, column: colInt32,
		append: appendInt32, Normalize: normalizeInt},
	avro.Long: {arrow: fixedArrow(arrow.PrimitiveTypes.Int64), scan: scanLong, column: colInt64,
		append: appendInt64, Normalize: normalizeLong},
	avro.Float: {arrow: fixedArrow(arrow.PrimitiveTypes.Float32), scan: scanFixedSize(4), column: colFloat32,
		append: appendFloat32, Normalize: normalizeFloat},
	avro.Double: {arrow: fixedArrow(arrow.PrimitiveTypes.Float64), scan: scanFixedSize(8), column: colFloat64,
		append: appendFloat64, Normalize: normalizeDouble},
	avro.String: {arrow: fixedArrow(arrow.BinaryTypes.String), scan: scanBytes, column: colString,
		dict: dictString, append: appendString},
	avro.Enum: {arrow: fixedArrow(arrow.BinaryTypes.String), scan: scanEnum, column: colEnum,
		dict: dictEnum, append: appendString},
	avro.Bytes: {arrow: fixedArrow(arrow.BinaryTypes.Binary), scan: scanBytes, column: colBinary,
		append: appendBinary, Normalize: normalizeBytes},
	avro.Fixed: {arrow: fixedSizeArrow, scan: scanFixed, column: colFixed,
		append: appendFixed, Normalize: normalizeFixed, JSON: jsonFixed},
}

// ScalarOf returns the row of the scalar table for s (dereferenced, not a
// union), or false for a record, array, map, union, null or an unknown
// type.
func ScalarOf(s avro.Schema) (Scalar, bool) { return scalarOf(Deref(s)) }

func scalarOf(s avro.Schema) (Scalar, bool) {
	if ls := Logical(s); ls != nil {
		if sc, ok := logicalScalars[ls.Type()]; ok && (ls.Type() != avro.UUID || s.Type() == avro.String) {
			return sc, true
		}
	}
	sc, ok := primitiveScalars[s.Type()]
	return sc, ok
}

// ScalarNames names the rows of the scalar table, sorted:
// "logical:<logical type>" and "primitive:<type>".
func ScalarNames() []string {
	var names []string
	for lt := range logicalScalars {
		names = append(names, "logical:"+string(lt))
	}
	for pt := range primitiveScalars {
		names = append(names, "primitive:"+string(pt))
	}
	sort.Strings(names)
	return names
}

// Arrow types.

func fixedArrow(dt arrow.DataType) func(avro.Schema, string) (arrow.DataType, error) {
	return func(avro.Schema, string) (arrow.DataType, error) { return dt, nil }
}

func fixedSizeArrow(s avro.Schema, _ string) (arrow.DataType, error) {
	return &arrow.FixedSizeBinaryType{ByteWidth: s.(*avro.FixedSchema).Size()}, nil
}

func decimalArrow(s avro.Schema, path string) (arrow.DataType, error) {
	d, _ := Logical(s).(*avro.DecimalLogicalSchema)
	if d == nil || d.Precision() < 1 || d.Precision() > 38 {
		return nil, fmt.Errorf("%w: field %q: decimal precision must be 1..38", ErrUnsupportedSchema, path)
	}
	return &arrow.Decimal128Type{Precision: int32(d.Precision()), Scale: int32(d.Scale())}, nil
}
