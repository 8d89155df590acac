package jobs

import (
	"fmt"
	"maps"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
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

// explodeProjection is explode on the columnar path, for records of one
// writer schema: the array field's items are found in the record's bytes,
// and each row is the record's bytes with the array's replaced by one
// item's, a record of the explode schema (Out) that the writers take as
// any columnar row.
type explodeProjection struct {
	field string
	p     *avrocodec.Projection // identity over the writer schema
	out   *avrocodec.Projection // identity over the explode schema
	at    int                   // the array field's index
	// union: the field is a union; array its array branch's index
	union bool
	array int64
	item  *avrocodec.Projection // a record of one field, the items' type: finds where an item ends
	irow  avrocodec.Row
	items [][2]int // the items of the record at hand: [start, end) in the field's bytes
	buf   []byte
}

func newExplodeProjection(e *explode, p *avrocodec.Projection, out avro.Schema) (*explodeProjection, error) {
	xp := &explodeProjection{field: e.field, p: p, at: p.InIndex(e.field)}
	if xp.at < 0 {
		return nil, fmt.Errorf("%w: map.field: %q is not a field of the record %s", ErrSpec, e.field, p.In.FullName())
	}
	t := p.In.Fields()[xp.at].Type()
	if u, ok := t.(*avro.UnionSchema); ok {
		xp.union = true
		for i, b := range u.Types() {
			if b.Type() == avro.Array {
				xp.array = int64(i)
			}
		}
	}
	items, ok := arrayItems(t)
	if !ok {
		return nil, fmt.Errorf("%w: map.field: %q is %s, not an array", ErrSpec, e.field, typeName(t))
	}
	f, err := avro.NewField("item", items)
	if err != nil {
		return nil, err
	}
	wrap, err := avro.NewRecordSchema("explode_item", "sluice", []*avro.Field{f})
	if err != nil {
		return nil, err
	}
	if xp.item, err = avrocodec.NewProjection(wrap, nil, nil); err != nil {
		return nil, err
	}
	if xp.out, err = avrocodec.NewProjection(out, nil, nil); err != nil {
		return nil, err
	}
	return xp, nil
}

// find finds the items of row's array (Scan checked its bytes); a null
// is a bad record, as on the map path.
func (xp *explodeProjection) find(row *avrocodec.Row) (int, error) {
	b := row.Field(xp.at)
	xp.items = xp.items[:0]
	i := 0
	if xp.union {
		idx, j, err := avrocodec.ReadLong(b, 0)
		if err != nil {
			return 0, fmt.Errorf("%w: explode: the field %q: %v", ErrBadRecord, xp.field, err)
		}
		if idx != xp.array {
			return 0, badRecord("explode: the field %q is null, not an array", xp.field)
		}
		i = j
	}
	for {
		n, j, err := avrocodec.ReadLong(b, i)
		if err != nil {
			return 0, fmt.Errorf("%w: explode: the field %q: %v", ErrBadRecord, xp.field, err)
		}
		i = j
		if n == 0 {
			return len(xp.items), nil
		}
		if n < 0 {
			n = -n
			if _, i, err = avrocodec.ReadLong(b, i); err != nil { // the block's size in bytes
				return 0, fmt.Errorf("%w: explode: the field %q: %v", ErrBadRecord, xp.field, err)
			}
		}
		for ; n > 0; n-- {
			if err := xp.item.Scan(&xp.irow, b[i:]); err != nil {
				return 0, fmt.Errorf("%w: explode: the field %q: %v", ErrBadRecord, xp.field, err)
			}
			xp.items = append(xp.items, [2]int{i, i + xp.irow.Ends[0]})
			i += xp.irow.Ends[0]
		}
	}
}

// rowBody appends to b the bytes of the row of item k of the record in
// src: a record of the explode schema.
func (xp *explodeProjection) rowBody(src *avrocodec.Row, k int, b []byte) []byte {
	start, end := src.Start(xp.at), src.Ends[xp.at]
	it := xp.items[k]
	b = append(b, src.Body[:start]...)
	b = append(b, src.Body[start+it[0]:start+it[1]]...)
	return append(b, src.Body[end:src.Ends[len(src.Ends)-1]]...)
}
