package format

import (
	"fmt"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// normalizeRecord converts the values of a record to the Go types the Avro
// encoder wants (int64 for long, time.Time for timestamps, *big.Rat for
// decimals, ...), so that records decoded from JSON (float64 numbers, text
// timestamps) can be written as Avro too. It works in place on maps.
func normalizeRecord(rec *avro.RecordSchema, m map[string]any, prefix string) error {
	for _, f := range rec.Fields() {
		v, ok := m[f.Name()]
		if !ok {
			continue
		}
		nv, err := normalize(f.Type(), v, prefix+f.Name())
		if err != nil {
			return err
		}
		m[f.Name()] = nv
	}
	return nil
}

func normalize(s avro.Schema, v any, path string) (any, error) {
	s = avrocodec.Deref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		if v == nil {
			return nil, nil
		}
		b, _, err := avrocodec.NonNull(u, path)
		if err != nil {
			return v, nil // a general union: leave it to the encoder
		}
		b = avrocodec.Deref(b)
		name := avrocodec.TypeName(b)
		if b.Type() != avro.Map {
			v = avrocodec.UnwrapUnion(v, b)
		} else if m, ok := v.(map[string]any); ok && len(m) == 1 {
			if inner, ok := m["map"].(map[string]any); ok {
				v = inner
			}
		}
		nv, err := normalize(b, v, path)
		if err != nil {
			return nil, err
		}
		switch nv.(type) {
		case map[string]any, []any:
			// The encoder reads a map in a union as {"branch": value}.
			return map[string]any{name: nv}, nil
		}
		// Name the branch where the encoder cannot tell it from the Go
		// value: a logical type (it takes any time.Time for "int.date"),
		// an enum or a fixed (it takes a string or []byte for the primitive).
		if ls := avrocodec.Logical(b); ls != nil {
			return map[string]any{string(b.Type()) + "." + string(ls.Type()): nv}, nil
		}
		if _, named := b.(avro.NamedSchema); named {
			return map[string]any{name: nv}, nil
		}
		return nv, nil
	}
	if v == nil {
		return nil, nil
	}
	if sc, ok := avrocodec.ScalarOf(s); ok {
		if sc.Normalize == nil {
			return v, nil
		}
		return sc.Normalize(s, v, path)
	}
	switch s.Type() {
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, avrocodec.BadValue(path, v, "record")
		}
		return m, normalizeRecord(s.(*avro.RecordSchema), m, path+".")
	case avro.Array:
		xs, ok := v.([]any)
		if !ok {
			return v, nil
		}
		items := s.(*avro.ArraySchema).Items()
		for i, x := range xs {
			y, err := normalize(items, x, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			xs[i] = y
		}
		return xs, nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return v, nil
		}
		vals := s.(*avro.MapSchema).Values()
		for k, x := range m {
			y, err := normalize(vals, x, path+"{"+k+"}")
			if err != nil {
				return nil, err
			}
			m[k] = y
		}
		return m, nil
	}
	return v, nil
}
