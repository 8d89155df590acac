package format

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// colFn decodes one value at b[i:], which a scan has checked, into the
// builder it is bound to, and returns where the value ends.
type colFn func(b []byte, i int) int

// compileCol builds the decoder of values of s into bld, a builder of the
// Arrow type arrowType(s) gives. It appends what the map path's appender
// (compile) appends for the value the generic decoder makes of the same
// bytes.
func compileCol(s avro.Schema, bld array.Builder, path string) (colFn, error) {
	s = deref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		types := u.Types()
		branches := make([]colFn, len(types))
		for k, t := range types {
			if deref(t).Type() == avro.Null {
				branches[k] = func(_ []byte, i int) int { bld.AppendNull(); return i }
				continue
			}
			fn, err := compileValueCol(deref(t), bld, path)
			if err != nil {
				return nil, err
			}
			branches[k] = fn
		}
		if len(branches) == 2 {
			b0, b1 := branches[0], branches[1]
			return func(b []byte, i int) int {
				if b[i] == 0 { // index 0 is the one byte 0x00
					return b0(b, i+1)
				}
				x, i := longAt(b, i)
				if x == 0 {
					return b0(b, i)
				}
				return b1(b, i)
			}, nil
		}
		return func(b []byte, i int) int {
			x, i := longAt(b, i)
			return branches[x](b, i)
		}, nil
	}
	return compileValueCol(s, bld, path)
}

func compileValueCol(s avro.Schema, bld array.Builder, path string) (colFn, error) {
	if ls := logicalOf(s); ls != nil {
		switch ls.Type() {
		case avro.Decimal:
			db := bld.(*array.Decimal128Builder)
			raw := decimalRaw(s)
			return func(b []byte, i int) int {
				start, end, _ := raw(b, i)
				db.Append(decimal128.FromBigInt(unscaled(b[start:end])))
				return end
			}, nil
		case avro.UUID:
			if s.Type() == avro.String {
				ub := bld.(*extensions.UUIDBuilder)
				return func(b []byte, i int) int {
					start, end, _ := readBytes(b, i)
					id, _ := uuid.ParseBytes(b[start:end])
					ub.Append(id)
					return end
				}, nil
			}
		case avro.Date:
			db := bld.(*array.Date32Builder)
			return func(b []byte, i int) int {
				x, i := intAt(b, i)
				db.Append(arrow.Date32(x))
				return i
			}, nil
		case avro.TimeMillis:
			tb := bld.(*array.Time32Builder)
			return func(b []byte, i int) int {
				x, i := intAt(b, i)
				tb.Append(arrow.Time32(x))
				return i
			}, nil
		case avro.TimeMicros:
			tb := bld.(*array.Time64Builder)
			return func(b []byte, i int) int {
				x, i := longAt(b, i)
				tb.Append(arrow.Time64(x))
				return i
			}, nil
		case avro.TimestampMillis, avro.TimestampMicros, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
			tb := bld.(*array.TimestampBuilder)
			return func(b []byte, i int) int {
				x, i := longAt(b, i)
				tb.Append(arrow.Timestamp(x))
				return i
			}, nil
		}
	}
	switch s.Type() {
	case avro.Boolean:
		bb := bld.(*array.BooleanBuilder)
		return func(b []byte, i int) int {
			bb.Append(b[i] == 1)
			return i + 1
		}, nil
	case avro.Int:
		ib := bld.(*array.Int32Builder)
		return func(b []byte, i int) int {
			x, i := intAt(b, i)
			ib.Append(x)
			return i
		}, nil
	case avro.Long:
		lb := bld.(*array.Int64Builder)
		return func(b []byte, i int) int {
			x, i := longAt(b, i)
			lb.Append(x)
			return i
		}, nil
	case avro.Float:
		fb := bld.(*array.Float32Builder)
		return func(b []byte, i int) int {
			fb.Append(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
			return i + 4
		}, nil
	case avro.Double:
		fb := bld.(*array.Float64Builder)
		return func(b []byte, i int) int {
			fb.Append(math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
			return i + 8
		}, nil
	case avro.String:
		sb := bld.(*array.StringBuilder)
		return func(b []byte, i int) int {
			n, i := longAt(b, i)
			end := i + int(n)
			sb.BinaryBuilder.Append(b[i:end])
			return end
		}, nil
	case avro.Bytes:
		bb := bld.(*array.BinaryBuilder)
		return func(b []byte, i int) int {
			n, i := longAt(b, i)
			end := i + int(n)
			bb.Append(b[i:end])
			return end
		}, nil
	case avro.Fixed:
		fb := bld.(*array.FixedSizeBinaryBuilder)
		n := s.(*avro.FixedSchema).Size()
		return func(b []byte, i int) int {
			fb.Append(b[i : i+n])
			return i + n
		}, nil
	case avro.Enum:
		sb := bld.(*array.StringBuilder)
		symbols := s.(*avro.EnumSchema).Symbols()
		syms := make([][]byte, len(symbols))
		for k, x := range symbols {
			syms[k] = []byte(x)
		}
		return func(b []byte, i int) int {
			x, i := intAt(b, i)
			sb.BinaryBuilder.Append(syms[x])
			return i
		}, nil
	case avro.Record:
		sb, ok := bld.(*array.StructBuilder)
		if !ok {
			return nil, fmt.Errorf("%w: field %q: record into %s", ErrUnsupportedSchema, path, bld.Type())
		}
		var fns []colFn
		for k, f := range s.(*avro.RecordSchema).Fields() {
			fn, err := compileCol(f.Type(), sb.FieldBuilder(k), path+"."+f.Name())
			if err != nil {
				return nil, err
			}
			fns = append(fns, fn)
		}
		return func(b []byte, i int) int {
			sb.Append(true)
			for _, fn := range fns {
				i = fn(b, i)
			}
			return i
		}, nil
	case avro.Array:
		lb, ok := bld.(*array.ListBuilder)
		if !ok {
			return nil, fmt.Errorf("%w: field %q: array into %s", ErrUnsupportedSchema, path, bld.Type())
		}
		item, err := compileCol(s.(*avro.ArraySchema).Items(), lb.ValueBuilder(), path+"[]")
		if err != nil {
			return nil, err
		}
		return func(b []byte, i int) int {
			lb.Append(true)
			for {
				n, j := longAt(b, i)
				i = j
				if n == 0 {
					return i
				}
				if n < 0 {
					n = -n
					_, i = longAt(b, i)
				}
				for ; n > 0; n-- {
					i = item(b, i)
				}
			}
		}, nil
	case avro.Map:
		return compileMapCol(s.(*avro.MapSchema), bld, path)
	}
	return nil, fmt.Errorf("%w: field %q: Avro type %s", ErrUnsupportedSchema, path, s.Type())
}

// compileMapCol writes a map's entries sorted by key, the last of equal
// keys winning: the map path's order (it appends a Go map's sorted keys).
func compileMapCol(s *avro.MapSchema, bld array.Builder, path string) (colFn, error) {
	mb, ok := bld.(*array.MapBuilder)
	if !ok {
		return nil, fmt.Errorf("%w: field %q: map into %s", ErrUnsupportedSchema, path, bld.Type())
	}
	kb := mb.KeyBuilder().(*array.StringBuilder)
	val, err := compileCol(s.Values(), mb.ItemBuilder(), path+"{}")
	if err != nil {
		return nil, err
	}
	skip, err := compileScan(s.Values(), path+"{}", 0, false)
	if err != nil {
		return nil, err
	}
	type entry struct {
		key      []byte
		val, seq int
	}
	var entries []entry
	return func(b []byte, i int) int {
		mb.Append(true)
		entries = entries[:0]
		for {
			n, j := longAt(b, i)
			i = j
			if n == 0 {
				break
			}
			if n < 0 {
				n = -n
				_, i = longAt(b, i)
			}
			for ; n > 0; n-- {
				kn, k := longAt(b, i)
				key := b[k : k+int(kn)]
				i = k + int(kn)
				entries = append(entries, entry{key: key, val: i, seq: len(entries)})
				i, _ = skip(b, i)
			}
		}
		sort.Slice(entries, func(x, y int) bool {
			if c := bytes.Compare(entries[x].key, entries[y].key); c != 0 {
				return c < 0
			}
			return entries[x].seq < entries[y].seq
		})
		for x, e := range entries {
			if x+1 < len(entries) && string(entries[x+1].key) == string(e.key) {
				continue // a later value of the same key wins
			}
			kb.BinaryBuilder.Append(e.key)
			val(b, e.val)
		}
		return i
	}, nil
}
