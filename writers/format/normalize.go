package format

import (
	"fmt"
	"math/big"
	"time"

	"github.com/hamba/avro/v2"
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
	s = deref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		if v == nil {
			return nil, nil
		}
		b, _, err := nonNull(u, path)
		if err != nil {
			return v, nil // a general union: leave it to the encoder
		}
		b = deref(b)
		name := typeName(b)
		if b.Type() != avro.Map {
			v = unwrapUnion(v, name)
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
		return nv, nil
	}
	if v == nil {
		return nil, nil
	}
	if ls := logicalOf(s); ls != nil {
		switch ls.Type() {
		case avro.Decimal:
			d := ls.(*avro.DecimalLogicalSchema)
			if _, ok := v.(*big.Rat); ok {
				return v, nil
			}
			u, ok := toUnscaled(v, int32(d.Scale()))
			if !ok {
				return nil, badValue(path, v, "decimal")
			}
			return new(big.Rat).SetFrac(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)), nil
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			t, ok := toTime(v, time.Millisecond)
			if !ok {
				return nil, badValue(path, v, "timestamp")
			}
			return t, nil
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			t, ok := toTime(v, time.Microsecond)
			if !ok {
				return nil, badValue(path, v, "timestamp")
			}
			return t, nil
		case avro.Date:
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
		case avro.TimeMillis:
			if n, ok := toInt64(v); ok {
				if _, isDur := v.(time.Duration); !isDur {
					return time.Duration(n) * time.Millisecond, nil
				}
			}
			return v, nil
		case avro.TimeMicros:
			if n, ok := toInt64(v); ok {
				if _, isDur := v.(time.Duration); !isDur {
					return time.Duration(n) * time.Microsecond, nil
				}
			}
			return v, nil
		}
	}
	switch s.Type() {
	case avro.Int:
		n, ok := toInt64(v)
		if !ok || n != int64(int32(n)) {
			return nil, badValue(path, v, "int")
		}
		return int32(n), nil
	case avro.Long:
		n, ok := toInt64(v)
		if !ok {
			return nil, badValue(path, v, "long")
		}
		return n, nil
	case avro.Float:
		f, ok := toFloat64(v)
		if !ok {
			return nil, badValue(path, v, "float")
		}
		return float32(f), nil
	case avro.Double:
		f, ok := toFloat64(v)
		if !ok {
			return nil, badValue(path, v, "double")
		}
		return f, nil
	case avro.Bytes:
		if b, ok := toBytes(v); ok {
			return b, nil
		}
		return nil, badValue(path, v, "bytes")
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, badValue(path, v, "record")
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
