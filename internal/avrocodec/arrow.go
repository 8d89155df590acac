package avrocodec

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/hamba/avro/v2"
)

// ArrowSchema maps an Avro record schema to an Arrow schema, as Parquet
// files are written:
//
//	boolean → bool            int → int32          long → int64
//	float → float32           double → float64     string, enum → utf8
//	bytes → binary            fixed(n) → fixed_size_binary(n)
//	record → struct           array → list         map → map<utf8, V>
//	["null", T] / [T, "null"] → T, nullable         [T] → T
//	date → date32             time-millis → time32[ms]  time-micros → time64[us]
//	timestamp-millis → timestamp[ms, UTC]   timestamp-micros → timestamp[us, UTC]
//	local-timestamp-millis/micros → timestamp[ms/us] (no zone)
//	decimal(p ≤ 38, s) on bytes or fixed → decimal128(p, s)
//	uuid on string → arrow.uuid (Parquet UUID)
//
// A union of two or more non-null types, a bare null, or a decimal wider than
// 38 digits is an error wrapping ErrUnsupportedSchema that names the field.
func ArrowSchema(s avro.Schema) (*arrow.Schema, error) {
	rec, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: top level is %s, want a record", ErrUnsupportedSchema, s.Type())
	}
	if name, ok := SelfContaining(s); ok {
		return nil, fmt.Errorf("%w: record %s contains itself: a Parquet schema is a finite tree", ErrUnsupportedSchema, name)
	}
	fields, err := recordFields(rec, "")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func recordFields(rec *avro.RecordSchema, prefix string) ([]arrow.Field, error) {
	out := make([]arrow.Field, 0, len(rec.Fields()))
	for _, f := range rec.Fields() {
		path := prefix + f.Name()
		t, nullable, err := arrowType(f.Type(), path)
		if err != nil {
			return nil, err
		}
		out = append(out, arrow.Field{Name: f.Name(), Type: t, Nullable: nullable})
	}
	return out, nil
}

// nonNull returns the one non-null branch of a union and whether the union
// admits null.
func NonNull(u *avro.UnionSchema, path string) (avro.Schema, bool, error) {
	var branch avro.Schema
	nullable := false
	for _, t := range u.Types() {
		if t.Type() == avro.Null {
			nullable = true
			continue
		}
		if branch != nil {
			return nil, false, fmt.Errorf("%w: field %q: union of %s has more than one non-null type; "+
				"Parquet has no unions: use [\"null\", T] or a record with one optional field per type",
				ErrUnsupportedSchema, path, strings.Join(nonNullNames(u), ", "))
		}
		branch = t
	}
	if branch == nil {
		return nil, false, fmt.Errorf("%w: field %q: union has only null", ErrUnsupportedSchema, path)
	}
	return branch, nullable, nil
}

func nonNullNames(u *avro.UnionSchema) []string {
	var q []string
	for _, t := range u.Types() {
		if t.Type() != avro.Null {
			q = append(q, fmt.Sprintf("%q", TypeName(t)))
		}
	}
	return q
}

func TypeName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

func Deref(s avro.Schema) avro.Schema {
	for {
		r, ok := s.(*avro.RefSchema)
		if !ok {
			return s
		}
		s = r.Schema()
	}
}

func Logical(s avro.Schema) avro.LogicalSchema {
	if l, ok := s.(avro.LogicalTypeSchema); ok {
		return l.Logical()
	}
	return nil
}

func arrowType(s avro.Schema, path string) (arrow.DataType, bool, error) {
	s = Deref(s)
	nullable := false
	if u, ok := s.(*avro.UnionSchema); ok {
		b, n, err := NonNull(u, path)
		if err != nil {
			return nil, false, err
		}
		s, nullable = Deref(b), n
	}
	if sc, ok := scalarOf(s); ok {
		dt, err := sc.arrow(s, path)
		return dt, nullable, err
	}
	switch s.Type() {
	case avro.Record:
		fields, err := recordFields(s.(*avro.RecordSchema), path+".")
		if err != nil {
			return nil, false, err
		}
		return arrow.StructOf(fields...), nullable, nil
	case avro.Array:
		et, en, err := arrowType(s.(*avro.ArraySchema).Items(), path+"[]")
		if err != nil {
			return nil, false, err
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: et, Nullable: en}), nullable, nil
	case avro.Map:
		vt, vn, err := arrowType(s.(*avro.MapSchema).Values(), path+"{}")
		if err != nil {
			return nil, false, err
		}
		mt := arrow.MapOfWithMetadata(arrow.BinaryTypes.String, arrow.Metadata{}, vt, arrow.Metadata{})
		mt.SetItemNullable(vn)
		return mt, nullable, nil
	case avro.Null:
		return nil, false, fmt.Errorf("%w: field %q: a field of type null holds nothing", ErrUnsupportedSchema, path)
	}
	return nil, false, fmt.Errorf("%w: field %q: Avro type %s", ErrUnsupportedSchema, path, s.Type())
}

// selfContaining returns the name of a record that contains itself
// (directly or through other types), if s has one. Each named type is
// explored once.
func SelfContaining(s avro.Schema) (string, bool) {
	open, done := map[string]bool{}, map[string]bool{}
	var walk func(s avro.Schema) (string, bool)
	walk = func(s avro.Schema) (string, bool) {
		s = Deref(s)
		switch t := s.(type) {
		case *avro.RecordSchema:
			name := t.FullName()
			if open[name] {
				return name, true
			}
			if done[name] {
				return "", false
			}
			open[name] = true
			for _, f := range t.Fields() {
				if n, ok := walk(f.Type()); ok {
					return n, true
				}
			}
			delete(open, name)
			done[name] = true
		case *avro.UnionSchema:
			for _, b := range t.Types() {
				if n, ok := walk(b); ok {
					return n, true
				}
			}
		case *avro.ArraySchema:
			return walk(t.Items())
		case *avro.MapSchema:
			return walk(t.Values())
		}
		return "", false
	}
	return walk(s)
}
