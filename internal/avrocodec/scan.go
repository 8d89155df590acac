package avrocodec

import (
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// scanFn checks the value at b[i:] and returns where it ends.
type scanFn func(b []byte, i int) (int, error)

// maxDepth is how deep types may nest: each level is a call of the
// compilers and of the compiled checkers.
const maxDepth = 64

// compileScan builds the checker of one value of s. strict adds what
// Parquet needs beyond well-formed Avro: decimals within 38 digits and
// uuids that parse (the scalar table's strict column).
func compileScan(s avro.Schema, path string, depth int, strict bool) (scanFn, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: field %q: nested more than %d deep", ErrUnsupportedSchema, path, maxDepth)
	}
	s = Deref(s)
	switch t := s.(type) {
	case *avro.UnionSchema:
		return compileUnionScan(t, path, depth, strict)
	case *avro.RecordSchema:
		return compileRecordScan(t, path, depth, strict)
	case *avro.ArraySchema:
		item, err := compileScan(t.Items(), path+"[]", depth+1, strict)
		if err != nil {
			return nil, err
		}
		if minSize(t.Items(), 0) == 0 {
			return nil, fmt.Errorf("%w: %w: field %q", ErrUnsupportedSchema, ErrUnboundedItems, path)
		}
		return blocksScan(nil, item), nil
	case *avro.MapSchema:
		val, err := compileScan(t.Values(), path+"{}", depth+1, strict)
		if err != nil {
			return nil, err
		}
		return blocksScan(scanBytes(nil), val), nil
	}
	if s.Type() == avro.Null {
		return func(_ []byte, i int) (int, error) { return i, nil }, nil
	}
	sc, ok := scalarOf(s)
	if !ok {
		return nil, fmt.Errorf("%w: field %q: Avro type %s", ErrUnsupportedSchema, path, s.Type())
	}
	if strict && sc.strict != nil {
		return sc.strict(s, path)
	}
	return sc.scan(s), nil
}

func compileUnionScan(u *avro.UnionSchema, path string, depth int, strict bool) (scanFn, error) {
	types := u.Types()
	branches := make([]scanFn, len(types))
	for k, t := range types {
		fn, err := compileScan(t, path, depth+1, strict)
		if err != nil {
			return nil, err
		}
		branches[k] = fn
	}
	return func(b []byte, i int) (int, error) {
		x, i, err := readLong(b, i)
		if err != nil {
			return i, err
		}
		if x < 0 || x >= int64(len(branches)) {
			return i, fmt.Errorf("union index %d is not one of the %d branches", x, len(branches))
		}
		return branches[x](b, i)
	}, nil
}

func compileRecordScan(rec *avro.RecordSchema, path string, depth int, strict bool) (scanFn, error) {
	var fns []scanFn
	for _, f := range rec.Fields() {
		fn, err := compileScan(f.Type(), path+"."+f.Name(), depth+1, strict)
		if err != nil {
			return nil, err
		}
		fns = append(fns, fn)
	}
	return func(b []byte, i int) (int, error) {
		var err error
		for _, fn := range fns {
			if i, err = fn(b, i); err != nil {
				return i, err
			}
		}
		return i, nil
	}, nil
}

// blocksScan checks the blocks of an array (key nil) or a map: a count,
// negative when a byte size follows, then the items; a zero count ends
// them. Every item takes a byte at least, so a count is bounded by the
// bytes left, and the work by the record's size.
func blocksScan(key, item scanFn) scanFn {
	return func(b []byte, i int) (int, error) {
		for {
			n, j, err := readLong(b, i)
			if err != nil {
				return j, err
			}
			i = j
			if n == 0 {
				return i, nil
			}
			if n < 0 {
				if n == math.MinInt64 {
					return i, errors.New("block count out of range")
				}
				n = -n
				if _, i, err = readLong(b, i); err != nil {
					return i, err
				}
			}
			if n > int64(len(b)-i) {
				return i, fmt.Errorf("a block of %d items is more than the record can hold", n)
			}
			for ; n > 0; n-- {
				if key != nil {
					if i, err = key(b, i); err != nil {
						return i, err
					}
				}
				if i, err = item(b, i); err != nil {
					return i, err
				}
			}
		}
	}
}

// minSize is the fewest bytes a value of s takes.
func minSize(s avro.Schema, depth int) int {
	s = Deref(s)
	if depth > maxDepth {
		return 0
	}
	switch s.Type() {
	case avro.Null:
		return 0
	case avro.Float:
		return 4
	case avro.Double:
		return 8
	case avro.Fixed:
		return s.(*avro.FixedSchema).Size()
	case avro.Record:
		n := 0
		for _, f := range s.(*avro.RecordSchema).Fields() {
			n += minSize(f.Type(), depth+1)
		}
		return n
	}
	return 1
}

// needsStrict reports whether s holds, anywhere, a scalar whose table row
// has a strict check.
func needsStrict(s avro.Schema, depth int) bool {
	s = Deref(s)
	if depth > maxDepth {
		return false
	}
	switch t := s.(type) {
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			if needsStrict(b, depth+1) {
				return true
			}
		}
		return false
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			if needsStrict(f.Type(), depth+1) {
				return true
			}
		}
		return false
	case *avro.ArraySchema:
		return needsStrict(t.Items(), depth+1)
	case *avro.MapSchema:
		return needsStrict(t.Values(), depth+1)
	}
	sc, ok := scalarOf(s)
	return ok && sc.strict != nil
}

// Checkers of the scalar table (its scan and strict columns).

// scanPrimitive checks a logical type's value as its primitive's.
func scanPrimitive(s avro.Schema) scanFn {
	return primitiveScalars[s.Type()].scan(s)
}

func scanBoolean(avro.Schema) scanFn {
	return func(b []byte, i int) (int, error) {
		if i >= len(b) {
			return i, errShort
		}
		if b[i] > 1 {
			return i, fmt.Errorf("invalid boolean byte 0x%02x", b[i])
		}
		return i + 1, nil
	}
}

func scanInt(avro.Schema) scanFn {
	return func(b []byte, i int) (int, error) {
		_, i, err := readInt(b, i)
		return i, err
	}
}

func scanLong(avro.Schema) scanFn {
	return func(b []byte, i int) (int, error) {
		_, i, err := readLong(b, i)
		return i, err
	}
}

// scanBytes checks a string or bytes value.
func scanBytes(avro.Schema) scanFn {
	return func(b []byte, i int) (int, error) {
		_, end, err := readBytes(b, i)
		return end, err
	}
}

func scanFixedSize(n int) func(avro.Schema) scanFn {
	return func(avro.Schema) scanFn { return fixedScan(n) }
}

func scanFixed(s avro.Schema) scanFn { return fixedScan(s.(*avro.FixedSchema).Size()) }

func fixedScan(n int) scanFn {
	return func(b []byte, i int) (int, error) {
		if n > len(b)-i {
			return i, errShort
		}
		return i + n, nil
	}
}

func scanEnum(s avro.Schema) scanFn {
	n := int32(len(s.(*avro.EnumSchema).Symbols()))
	return func(b []byte, i int) (int, error) {
		x, i, err := readInt(b, i)
		if err == nil && (x < 0 || x >= n) {
			err = fmt.Errorf("enum index %d is not one of the %d symbols", x, n)
		}
		return i, err
	}
}

func strictDecimal(s avro.Schema, path string) (scanFn, error) {
	d, _ := Logical(s).(*avro.DecimalLogicalSchema)
	if d == nil {
		return nil, fmt.Errorf("%w: field %q: decimal without precision", ErrUnsupportedSchema, path)
	}
	raw := decimalRaw(s)
	return func(b []byte, i int) (int, error) {
		start, end, err := raw(b, i)
		if err != nil {
			return start, err
		}
		if unscaled(b[start:end]).BitLen() > 126 {
			return end, fmt.Errorf("decimal does not fit 38 digits")
		}
		return end, nil
	}, nil
}

// decimalRaw returns where the unscaled bytes of a decimal begin and end.
func decimalRaw(s avro.Schema) func(b []byte, i int) (int, int, error) {
	if f, ok := s.(*avro.FixedSchema); ok {
		n := f.Size()
		return func(b []byte, i int) (int, int, error) {
			if n > len(b)-i {
				return i, i, errShort
			}
			return i, i + n, nil
		}
	}
	return readBytes
}

// unscaled reads big-endian two's complement.
func unscaled(b []byte) *big.Int {
	u := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return u
}

func strictUUID(avro.Schema, string) (scanFn, error) {
	return func(b []byte, i int) (int, error) {
		start, end, err := readBytes(b, i)
		if err != nil {
			return end, err
		}
		if _, err := uuid.ParseBytes(b[start:end]); err != nil {
			return end, fmt.Errorf("uuid: %v", err)
		}
		return end, nil
	}, nil
}
