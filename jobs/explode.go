package jobs

import (
	"fmt"
	"maps"

	"github.com/hamba/avro/v2"
)

// explode is the built-in mapper `map: {mapper: explode, field: items}`:
// one row per element of the record's array field, each row the record's
// other fields plus the element in the array's place, under the field's
// name (a record element stays a nested column: items.qty). A record whose
// array is empty emits no row; one without the field, or whose field is
// not an array (null included), is a bad record.
type explode struct {
	field string
}

func newExplode(cfg MapperConfig) (Mapper, error) {
	if cfg.Field == "" {
		return nil, fmt.Errorf("%w: map.field: missing: mapper explode needs the array field to explode (map: {mapper: explode, field: items})", ErrSpec)
	}
	return &explode{field: cfg.Field}, nil
}

// arrayItems returns the items schema of t, an array or a union of null
// and an array.
func arrayItems(t avro.Schema) (avro.Schema, bool) {
	switch s := t.(type) {
	case *avro.ArraySchema:
		return s.Items(), true
	case *avro.UnionSchema:
		var items avro.Schema
		for _, b := range s.Types() {
			switch b.Type() {
			case avro.Null:
			case avro.Array:
				if items != nil {
					return nil, false
				}
				items = b.(*avro.ArraySchema).Items()
			default:
				return nil, false
			}
		}
		return items, items != nil
	}
	return nil, false
}

// Schema is in with the array field's type replaced by its items' type.
func (e *explode) Schema(in avro.Schema) (avro.Schema, error) {
	if in == nil {
		return nil, nil // schemaless JSON (jsonl output): rows as they come
	}
	rec, ok := in.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: map.field: mapper explode needs record values, not %s", ErrSpec, in.Type())
	}
	names := make([]string, len(rec.Fields()))
	fields := make([]*avro.Field, 0, len(rec.Fields()))
	found := false
	for i, f := range rec.Fields() {
		names[i] = f.Name()
		t := f.Type()
		var opts []avro.SchemaOption
		if f.Name() == e.field {
			items, ok := arrayItems(t)
			if !ok {
				return nil, fmt.Errorf("%w: map.field: %q is %s in %s, not an array: explode takes an array field", ErrSpec, e.field, typeName(t), rec.FullName())
			}
			t, found = items, true
		} else if f.HasDefault() {
			opts = append(opts, avro.WithDefault(f.Default()))
		}
		nf, err := avro.NewField(f.Name(), t, opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: map.field: %v", ErrSpec, err)
		}
		fields = append(fields, nf)
	}
	if !found {
		return nil, fmt.Errorf("%w: map.field: %q is not a field of the record %s (fields: %s)", ErrSpec, e.field, rec.FullName(), fieldList(names))
	}
	out, err := avro.NewRecordSchema(rec.Name(), rec.Namespace(), fields)
	if err != nil {
		return nil, fmt.Errorf("%w: map.field: %v", ErrSpec, err)
	}
	return out, nil
}

// typeName names an Avro type in messages: "string", "a union of null,
// string", "a record sluice.Item".
func typeName(t avro.Schema) string {
	switch s := t.(type) {
	case *avro.UnionSchema:
		n := "a union of"
		for i, b := range s.Types() {
			if i > 0 {
				n += ","
			}
			n += " " + string(b.Type())
		}
		return n
	case avro.NamedSchema:
		return fmt.Sprintf("a %s %s", t.Type(), s.FullName())
	}
	return "a " + string(t.Type())
}

func (e *explode) Map(rec *Record, emit func(map[string]any) error) error {
	v, ok := rec.Value[e.field]
	if !ok {
		return badRecord("explode: the record has no field %q", e.field)
	}
	if u, ok := v.(map[string]any); ok && len(u) == 1 { // a union's branch, as hamba decodes it
		if a, ok := u["array"]; ok {
			v = a
		}
	}
	items, ok := v.([]any)
	if !ok {
		if v == nil {
			return badRecord("explode: the field %q is null, not an array", e.field)
		}
		return badRecord("explode: the field %q is %s, not an array", e.field, valueKind(v))
	}
	for i, item := range items {
		row := rec.Value
		if i < len(items)-1 {
			row = maps.Clone(rec.Value) // emit owns its row; the last takes the record's
		}
		row[e.field] = item
		if err := emit(row); err != nil {
			return err
		}
	}
	return nil
}

// valueKind names the kind of a decoded value in messages.
func valueKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a record"
	case []byte:
		return "bytes"
	case int, int32, int64, float32, float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}
