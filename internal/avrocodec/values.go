package avrocodec

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"sort"
	"time"

	"github.com/hamba/avro/v2"
)

// UnwrapUnion removes hamba's generic union wrapper {"name": value} from a
// value of the union branch s: name is s's type name or, for a logical
// type, "type.logical" (hamba wraps ["null", local-timestamp-micros] so).
// Any other value is returned as it is.
func UnwrapUnion(v any, branch avro.Schema) any {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return v
	}
	if inner, ok := m[TypeName(branch)]; ok {
		return inner
	}
	if ls := Logical(branch); ls != nil {
		if inner, ok := m[string(branch.Type())+"."+string(ls.Type())]; ok {
			return inner
		}
	}
	return v
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<62 {
			return 0, false
		}
		return int64(x), true
	case float32:
		return toInt64(float64(x))
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case time.Duration:
		return int64(x), true
	}
	return 0, false
}

func toFloat64(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	if n, ok := toInt64(v); ok {
		return float64(n), true
	}
	return 0, false
}

// toTime accepts a time.Time, an RFC 3339 string, or a number in unit
// (milliseconds or microseconds since the epoch).
func toTime(v any, unit time.Duration) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x, true
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return t, err == nil
	}
	n, ok := toInt64(v)
	if !ok {
		return time.Time{}, false
	}
	if unit == time.Millisecond {
		return time.UnixMilli(n), true
	}
	return time.UnixMicro(n), true
}

// toBytes accepts []byte, string and byte arrays ([N]byte, as Avro fixed
// values decode).
func toBytes(v any) ([]byte, bool) {
	switch x := v.(type) {
	case []byte:
		return x, true
	case string:
		return []byte(x), true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b := make([]byte, rv.Len())
		reflect.Copy(reflect.ValueOf(b), rv)
		return b, true
	}
	return nil, false
}

// toUnscaled returns v × 10^scale as an integer: v is *big.Rat (hamba's
// decimal), big.Rat, a decimal string, json.Number, float64 or an integer.
func toUnscaled(v any, scale int32) (*big.Int, bool) {
	var r *big.Rat
	switch x := v.(type) {
	case *big.Rat:
		r = x
	case big.Rat:
		r = &x
	case string:
		var ok bool
		r, ok = new(big.Rat).SetString(x)
		if !ok {
			return nil, false
		}
	case json.Number:
		var ok bool
		r, ok = new(big.Rat).SetString(string(x))
		if !ok {
			return nil, false
		}
	case float64:
		r = new(big.Rat)
		if r.SetFloat64(x) == nil {
			return nil, false
		}
	default:
		n, ok := toInt64(v)
		if !ok {
			return nil, false
		}
		r = new(big.Rat).SetInt64(n)
	}
	if r == nil {
		return nil, false
	}
	num := new(big.Int).Mul(r.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	q, m := new(big.Int).QuoRem(num, r.Denom(), new(big.Int))
	// round half away from zero
	if m.Sign() != 0 {
		m2 := new(big.Int).Mul(m.Abs(m), big.NewInt(2))
		if m2.Cmp(r.Denom()) >= 0 {
			if num.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
	}
	return q, true
}

func ratString(u *big.Int, scale int32) string {
	r := new(big.Rat).SetFrac(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	return r.FloatString(int(scale))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
