package avrocodec

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

// The column decoders: one value of Avro binary, which a scan has checked,
// straight into an Arrow builder of the type ArrowSchema gives it. They
// append what the map path's appenders append for the value the generic
// decoder makes of the same bytes (the differential tests hold the two to
// the same files). They read without bounds checks of their own: a scan
// accepted the bytes first.

// colFn decodes one value at b[i:], which a scan has checked, into the
// builder it is bound to, and returns where the value ends.
type colFn func(b []byte, i int) int

// Columns decodes the fields of scanned rows into the builders of a
// record's top-level columns: the Parquet writer's columnar path. It is
// not safe for concurrent use (its builders are not).
type Columns struct {
	p      *Projection
	cols   []colFn  // per Out field, into its top-level builder
	strict []scanFn // per Out field: nil, or the checks beyond the scan
}

// NewColumns compiles the decoders of p's Out fields into builders, one
// per Out field, of the Arrow types ArrowSchema(p.Out) gives.
func NewColumns(p *Projection, builders []array.Builder) (*Columns, error) {
	return NewColumnsDict(p, builders, nil)
}

// NewColumnsDict is NewColumns with the text columns that have a
// StringDict in dicts (by Out field; nil entries and a short or nil
// dicts: none) decoded into it instead of their builder. Such a field must
// be a string or an enum, or a union of null and one of them.
func NewColumnsDict(p *Projection, builders []array.Builder, dicts []*StringDict) (*Columns, error) {
	if len(builders) < len(p.Pick) {
		return nil, fmt.Errorf("avrocodec: columns: %d builders for %d fields", len(builders), len(p.Pick))
	}
	c := &Columns{p: p, cols: make([]colFn, len(p.Pick)), strict: make([]scanFn, len(p.Pick))}
	for j, i := range p.Pick {
		f := p.In.Fields()[i]
		var fn colFn
		var err error
		if j < len(dicts) && dicts[j] != nil {
			fn, err = compileDictCol(f.Type(), dicts[j], f.Name())
		} else {
			fn, err = compileCol(f.Type(), builders[j], f.Name(), 0)
		}
		if err != nil {
			return nil, err
		}
		c.cols[j] = fn
		if needsStrict(f.Type(), 0) {
			if c.strict[j], err = compileScan(f.Type(), f.Name(), 0, true); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Check applies the checks a column needs beyond the scan (a decimal within
// 38 digits, a uuid that parses) to row, which must be of the projection c
// was made for. An error wraps ErrBadValue; nothing is appended either way.
func (c *Columns) Check(row *Row) error {
	for j, chk := range c.strict {
		if chk != nil {
			if _, err := chk(row.Body, row.Start(c.p.Pick[j])); err != nil {
				return fmt.Errorf("%w: field %q: %v", ErrBadValue, c.p.Out.Fields()[j].Name(), err)
			}
		}
	}
	return nil
}

// Append decodes row, which Check accepted, into the builders: one value
// each.
func (c *Columns) Append(row *Row) {
	for j, fn := range c.cols {
		fn(row.Body, row.Start(c.p.Pick[j]))
	}
}

// compileCol builds the decoder of values of s into bld.
func compileCol(s avro.Schema, bld array.Builder, path string, depth int) (colFn, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%w: field %q: nested more than %d deep", ErrUnsupportedSchema, path, maxDepth)
	}
	s = Deref(s)
	switch t := s.(type) {
	case *avro.UnionSchema:
		return compileUnionCol(t, bld, path, depth)
	case *avro.RecordSchema:
		return compileRecordCol(t, bld, path, depth)
	case *avro.ArraySchema:
		return compileArrayCol(t, bld, path, depth)
	case *avro.MapSchema:
		return compileMapCol(t, bld, path, depth)
	}
	sc, ok := scalarOf(s)
	if !ok {
		return nil, fmt.Errorf("%w: field %q: Avro type %s", ErrUnsupportedSchema, path, s.Type())
	}
	return sc.column(s, bld, path)
}

// compileUnionCol decodes a union: a null branch appends a null, the other
// (one, as ArrowSchema allows) its value.
func compileUnionCol(u *avro.UnionSchema, bld array.Builder, path string, depth int) (colFn, error) {
	return compileUnion(u, bld.AppendNull, func(t avro.Schema) (colFn, error) { return compileCol(t, bld, path, depth+1) })
}

// compileDictCol builds the decoder of a top-level text field's values
// into d: a scalar whose row of the scalar table has a dict decoder, or a
// union of null and one.
func compileDictCol(s avro.Schema, d *StringDict, path string) (colFn, error) {
	s = Deref(s)
	if u, ok := s.(*avro.UnionSchema); ok {
		return compileUnion(u, d.AppendNull, func(t avro.Schema) (colFn, error) { return compileDictCol(t, d, path) })
	}
	sc, ok := scalarOf(s)
	if !ok || sc.dict == nil {
		return nil, fmt.Errorf("%w: field %q: Avro type %s into a dictionary", ErrUnsupportedSchema, path, s.Type())
	}
	return sc.dict(s, d), nil
}

// compileUnion decodes a union whose null branch calls null and whose
// other branches are compiled by branch.
func compileUnion(u *avro.UnionSchema, null func(), branch func(avro.Schema) (colFn, error)) (colFn, error) {
	types := u.Types()
	branches := make([]colFn, len(types))
	for k, t := range types {
		if Deref(t).Type() == avro.Null {
			branches[k] = func(_ []byte, i int) int { null(); return i }
			continue
		}
		fn, err := branch(t)
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

func compileRecordCol(rec *avro.RecordSchema, bld array.Builder, path string, depth int) (colFn, error) {
	sb, err := builderOf[*array.StructBuilder](bld, path, "record")
	if err != nil {
		return nil, err
	}
	var fns []colFn
	for k, f := range rec.Fields() {
		fn, err := compileCol(f.Type(), sb.FieldBuilder(k), path+"."+f.Name(), depth+1)
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
}

func compileArrayCol(a *avro.ArraySchema, bld array.Builder, path string, depth int) (colFn, error) {
	lb, err := builderOf[*array.ListBuilder](bld, path, "array")
	if err != nil {
		return nil, err
	}
	item, err := compileCol(a.Items(), lb.ValueBuilder(), path+"[]", depth+1)
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
}

// compileMapCol writes a map's entries sorted by key, the last of equal
// keys winning: the map path's order (it appends a Go map's sorted keys).
func compileMapCol(s *avro.MapSchema, bld array.Builder, path string, depth int) (colFn, error) {
	mb, err := builderOf[*array.MapBuilder](bld, path, "map")
	if err != nil {
		return nil, err
	}
	kb, err := builderOf[*array.StringBuilder](mb.KeyBuilder(), path, "map key")
	if err != nil {
		return nil, err
	}
	val, err := compileCol(s.Values(), mb.ItemBuilder(), path+"{}", depth+1)
	if err != nil {
		return nil, err
	}
	skip, err := compileScan(s.Values(), path+"{}", depth+1, false)
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

// builderOf is bld as a B, or an ErrUnsupportedSchema naming the field: a
// builder not made from ArrowSchema's type.
func builderOf[B array.Builder](bld array.Builder, path, what string) (B, error) {
	b, ok := bld.(B)
	if !ok {
		return b, fmt.Errorf("%w: field %q: %s into %s", ErrUnsupportedSchema, path, what, bld.Type())
	}
	return b, nil
}

// Decoders of the scalar table (its column column). Each takes the builder
// of the Arrow type the row's arrow column gives.

// colOf binds the decoder fn makes to bld as a B.
func colOf[B array.Builder](fn func(B) colFn) func(avro.Schema, array.Builder, string) (colFn, error) {
	return func(s avro.Schema, bld array.Builder, path string) (colFn, error) {
		b, err := builderOf[B](bld, path, string(s.Type()))
		if err != nil {
			return nil, err
		}
		return fn(b), nil
	}
}

var (
	colBoolean = colOf(func(bb *array.BooleanBuilder) colFn {
		return func(b []byte, i int) int { bb.Append(b[i] == 1); return i + 1 }
	})
	colInt32 = colOf(func(ib *array.Int32Builder) colFn {
		return func(b []byte, i int) int { x, i := intAt(b, i); ib.Append(x); return i }
	})
	colInt64 = colOf(func(lb *array.Int64Builder) colFn {
		return func(b []byte, i int) int { x, i := longAt(b, i); lb.Append(x); return i }
	})
	colFloat32 = colOf(func(fb *array.Float32Builder) colFn {
		return func(b []byte, i int) int {
			fb.Append(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
			return i + 4
		}
	})
	colFloat64 = colOf(func(fb *array.Float64Builder) colFn {
		return func(b []byte, i int) int {
			fb.Append(math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
			return i + 8
		}
	})
	colString = colOf(func(sb *array.StringBuilder) colFn {
		return func(b []byte, i int) int {
			n, i := longAt(b, i)
			end := i + int(n)
			sb.BinaryBuilder.Append(b[i:end])
			return end
		}
	})
	colBinary = colOf(func(bb *array.BinaryBuilder) colFn {
		return func(b []byte, i int) int {
			n, i := longAt(b, i)
			end := i + int(n)
			bb.Append(b[i:end])
			return end
		}
	})
	colDate = colOf(func(db *array.Date32Builder) colFn {
		return func(b []byte, i int) int { x, i := intAt(b, i); db.Append(arrow.Date32(x)); return i }
	})
	colTime32 = colOf(func(tb *array.Time32Builder) colFn {
		return func(b []byte, i int) int { x, i := intAt(b, i); tb.Append(arrow.Time32(x)); return i }
	})
	colTime64 = colOf(func(tb *array.Time64Builder) colFn {
		return func(b []byte, i int) int { x, i := longAt(b, i); tb.Append(arrow.Time64(x)); return i }
	})
	colTimestamp = colOf(func(tb *array.TimestampBuilder) colFn {
		return func(b []byte, i int) int { x, i := longAt(b, i); tb.Append(arrow.Timestamp(x)); return i }
	})
	colUUID = colOf(func(ub *extensions.UUIDBuilder) colFn {
		return func(b []byte, i int) int {
			start, end, _ := readBytes(b, i)
			id, _ := uuid.ParseBytes(b[start:end])
			ub.Append(id)
			return end
		}
	})
)

// Decoders of the scalar table's dict column: a text value into a
// StringDict.

func dictString(_ avro.Schema, d *StringDict) colFn {
	return func(b []byte, i int) int {
		n, i := longAt(b, i)
		end := i + int(n)
		d.Append(b[i:end])
		return end
	}
}

func dictEnum(s avro.Schema, d *StringDict) colFn {
	symbols := s.(*avro.EnumSchema).Symbols()
	syms := make([][]byte, len(symbols))
	for k, x := range symbols {
		syms[k] = []byte(x)
	}
	return func(b []byte, i int) int {
		x, i := intAt(b, i)
		d.Append(syms[x])
		return i
	}
}

func colFixed(s avro.Schema, bld array.Builder, path string) (colFn, error) {
	fb, err := builderOf[*array.FixedSizeBinaryBuilder](bld, path, "fixed")
	if err != nil {
		return nil, err
	}
	n := s.(*avro.FixedSchema).Size()
	return func(b []byte, i int) int {
		fb.Append(b[i : i+n])
		return i + n
	}, nil
}

func colEnum(s avro.Schema, bld array.Builder, path string) (colFn, error) {
	sb, err := builderOf[*array.StringBuilder](bld, path, "enum")
	if err != nil {
		return nil, err
	}
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
}

func colDecimal(s avro.Schema, bld array.Builder, path string) (colFn, error) {
	db, err := builderOf[*array.Decimal128Builder](bld, path, "decimal")
	if err != nil {
		return nil, err
	}
	raw := decimalRaw(s)
	return func(b []byte, i int) int {
		start, end, _ := raw(b, i)
		db.Append(decimal128.FromBigInt(unscaled(b[start:end])))
		return end
	}, nil
}
