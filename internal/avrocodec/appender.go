package avrocodec

import (
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/hamba/avro/v2"
)

// The map path: generic values (a map[string]any record, as hamba/avro or
// encoding/json decode it) into Arrow builders.

// appendFn appends one value (nil for null) to a builder.
type appendFn func(b array.Builder, v any) error

// Appenders puts the fields of generic records into the builders of a
// record's top-level columns. It is not safe for concurrent use.
type Appenders struct {
	puts  []func(v any) error // per field, bound to its builder
	names []string
}

// NewAppenders compiles the appenders of the fields of rec into builders,
// one per field, of the types ArrowSchema(rec) gives (more builders, as
// for metadata columns, are left alone).
func NewAppenders(rec *avro.RecordSchema, builders []array.Builder) (*Appenders, error) {
	as, err := ArrowSchema(rec)
	if err != nil {
		return nil, err
	}
	fns, err := compileRecord(rec, as.Fields(), "")
	if err != nil {
		return nil, err
	}
	if len(builders) < len(fns) {
		return nil, fmt.Errorf("avrocodec: appenders: %d builders for %d fields", len(builders), len(fns))
	}
	a := &Appenders{puts: make([]func(any) error, len(fns)), names: fieldNames(rec)}
	for i, fn := range fns {
		a.puts[i] = bindAppender(builders[i], fn)
	}
	return a, nil
}

// Append puts the fields of value (a missing one is null) into the
// builders. A value that does not fit is an error wrapping ErrBadValue;
// the builders then hold part of the record (the caller drops it).
func (a *Appenders) Append(value map[string]any) error {
	for i, put := range a.puts {
		if err := put(value[a.names[i]]); err != nil {
			return err
		}
	}
	return nil
}

// compileRecord builds one appender per field of an Avro record whose Arrow
// mapping is fields (from recordFields).
func compileRecord(rec *avro.RecordSchema, fields []arrow.Field, prefix string) ([]appendFn, error) {
	out := make([]appendFn, len(fields))
	for i, f := range rec.Fields() {
		fn, err := compile(f.Type(), fields[i].Type, fields[i].Nullable, prefix+f.Name())
		if err != nil {
			return nil, err
		}
		out[i] = fn
	}
	return out, nil
}

func compile(s avro.Schema, dt arrow.DataType, nullable bool, path string) (appendFn, error) {
	s = Deref(s)
	var branch avro.Schema // nil: no wrapper to remove
	if u, ok := s.(*avro.UnionSchema); ok {
		b, _, err := NonNull(u, path)
		if err != nil {
			return nil, err
		}
		s = Deref(b)
		if s.Type() != avro.Map {
			branch = s
		}
	}
	inner, err := compileValue(s, dt, path)
	if err != nil {
		return nil, err
	}
	return func(b array.Builder, v any) error {
		if branch != nil {
			v = UnwrapUnion(v, branch)
		}
		if v == nil {
			if !nullable {
				return fmt.Errorf("%w: field %q: missing or null, and the schema does not allow null", ErrBadValue, path)
			}
			b.AppendNull()
			return nil
		}
		return inner(b, v)
	}, nil
}

func compileValue(s avro.Schema, dt arrow.DataType, path string) (appendFn, error) {
	if sc, ok := scalarOf(s); ok {
		return sc.append(dt, path), nil
	}
	switch t := dt.(type) {
	case *arrow.StructType:
		rec, ok := s.(*avro.RecordSchema)
		if !ok {
			return nil, fmt.Errorf("%w: field %q: struct without a record schema", ErrUnsupportedSchema, path)
		}
		fns, err := compileRecord(rec, t.Fields(), path+".")
		if err != nil {
			return nil, err
		}
		names := fieldNames(rec)
		return func(b array.Builder, v any) error {
			m, ok := v.(map[string]any)
			if !ok {
				return BadValue(path, v, "record (map[string]any)")
			}
			sb := b.(*array.StructBuilder)
			sb.Append(true)
			for i, fn := range fns {
				if err := fn(sb.FieldBuilder(i), m[names[i]]); err != nil {
					return err
				}
			}
			return nil
		}, nil
	case *arrow.ListType:
		items := s.(*avro.ArraySchema).Items()
		fn, err := compile(items, t.Elem(), t.ElemField().Nullable, path+"[]")
		if err != nil {
			return nil, err
		}
		return func(b array.Builder, v any) error {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			vb := lb.ValueBuilder()
			switch xs := v.(type) {
			case []any:
				for _, x := range xs {
					if err := fn(vb, x); err != nil {
						return err
					}
				}
			case []string:
				for _, x := range xs {
					if err := fn(vb, x); err != nil {
						return err
					}
				}
			default:
				return BadValue(path, v, "array ([]any)")
			}
			return nil
		}, nil
	case *arrow.MapType:
		values := s.(*avro.MapSchema).Values()
		fn, err := compile(values, t.ItemType(), t.ItemField().Nullable, path+"{}")
		if err != nil {
			return nil, err
		}
		return func(b array.Builder, v any) error {
			m, ok := v.(map[string]any)
			if !ok {
				return BadValue(path, v, "map (map[string]any)")
			}
			mb := b.(*array.MapBuilder)
			mb.Append(true)
			kb, ib := mb.KeyBuilder().(*array.StringBuilder), mb.ItemBuilder()
			for _, k := range sortedKeys(m) {
				kb.Append(k)
				if err := fn(ib, m[k]); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}
	return nil, fmt.Errorf("%w: field %q: no writer for Arrow type %s", ErrUnsupportedSchema, path, dt)
}

func fieldNames(rec *avro.RecordSchema) []string {
	names := make([]string, len(rec.Fields()))
	for i, f := range rec.Fields() {
		names[i] = f.Name()
	}
	return names
}

// bindAppender binds fn to b, a top-level builder (the RecordBuilder keeps
// it across row groups), with a fast path for the Go type that needs no
// conversion: a string for a string column, an int64 for a long, and so on.
// Every other value (nil, a union wrapper, a JSON number, a text
// timestamp) takes fn, so the result is the same either way.
func bindAppender(b array.Builder, fn appendFn) func(v any) error {
	switch bb := b.(type) {
	case *array.StringBuilder:
		return func(v any) error {
			if x, ok := v.(string); ok {
				bb.Append(x)
				return nil
			}
			return fn(b, v)
		}
	case *array.Int64Builder:
		return func(v any) error {
			if x, ok := v.(int64); ok {
				bb.Append(x)
				return nil
			}
			return fn(b, v)
		}
	case *array.Int32Builder:
		return func(v any) error {
			if x, ok := v.(int32); ok {
				bb.Append(x)
				return nil
			}
			return fn(b, v)
		}
	case *array.Float64Builder:
		return func(v any) error {
			if x, ok := v.(float64); ok {
				bb.Append(x)
				return nil
			}
			return fn(b, v)
		}
	case *array.BooleanBuilder:
		return func(v any) error {
			if x, ok := v.(bool); ok {
				bb.Append(x)
				return nil
			}
			return fn(b, v)
		}
	case *array.TimestampBuilder:
		micros := bb.Type().(*arrow.TimestampType).Unit == arrow.Microsecond
		return func(v any) error {
			if t, ok := v.(time.Time); ok {
				if micros {
					bb.Append(arrow.Timestamp(t.UnixMicro()))
				} else {
					bb.Append(arrow.Timestamp(t.UnixMilli()))
				}
				return nil
			}
			return fn(b, v)
		}
	}
	return func(v any) error { return fn(b, v) }
}
