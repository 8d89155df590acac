package format

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// The columnar path. A record that arrives as Avro binary (a registry- or
// schema_file-decoded Kafka value) need not become a map[string]any to be
// written: an AvroProjection checks its bytes once (Scan), finding where
// each field begins, and the Parquet writer then decodes the fields
// straight into its Arrow column builders, the Avro writer copies their
// bytes. This is the design of Arrow Rust's arrow-avro reader. The generic
// map (AvroRow.Map) is made only for the writers that need it (JSON lines).
//
// Scan accepts exactly the bytes hamba/avro's generic decoder accepts, and
// the values written are the ones the map path writes: a differential test
// holds the two paths to the same files.

// maxAvroBytes is the largest string or bytes value a record may hold: the
// generic decoder's limit (hamba/avro's MaxByteSliceSize default), so that
// both paths refuse the same records.
const maxAvroBytes = 1 << 20

// ErrUnboundedItems (with ErrUnsupportedSchema) refuses an array whose items
// take no bytes (records without fields): its count alone, a few bytes,
// could ask for any amount of work, and arrays of them multiply it.
var ErrUnboundedItems = errors.New("format: an array of items that take no bytes")

var errAvroShort = errors.New("unexpected end of the record")

// AvroProjection reads records written in Avro binary with the schema In as
// rows of the schema Out, whose fields are fields of In, all of them
// (identity) or some, renamed and reordered (select). It is safe for
// concurrent use; an AvroRow is not.
type AvroProjection struct {
	In, Out *avro.RecordSchema
	// Pick maps Out's fields to In's: Out field j is In field Pick[j].
	Pick []int
	scan []scanFn // per In field
	// fixed: the byte length of each In field when every one is of fixed
	// size (only longs and such are not), else nil.
	outFP [32]byte
}

// scanFn checks the value at b[i:] and returns where it ends.
type scanFn func(b []byte, i int) (int, error)

// NewAvroProjection compiles the projection of in onto out. pick nil is
// the identity (out must then be in, or nil). Each Out field must have the
// type of the In field it comes from.
func NewAvroProjection(in, out avro.Schema, pick []int) (*AvroProjection, error) {
	inRec, ok := in.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: top level is %s, want a record", ErrUnsupportedSchema, in.Type())
	}
	if out == nil {
		out = in
	}
	outRec, ok := out.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: top level is %s, want a record", ErrUnsupportedSchema, out.Type())
	}
	if name, ok := selfContaining(inRec); ok {
		return nil, fmt.Errorf("%w: record %s contains itself: the columnar path takes finite schemas", ErrUnsupportedSchema, name)
	}
	inFields, outFields := inRec.Fields(), outRec.Fields()
	if pick == nil {
		if len(outFields) != len(inFields) {
			return nil, fmt.Errorf("format: projection: identity needs the same fields (%d in, %d out)", len(inFields), len(outFields))
		}
		pick = make([]int, len(inFields))
		for i := range pick {
			pick[i] = i
		}
	}
	if len(pick) != len(outFields) {
		return nil, fmt.Errorf("format: projection: %d picks for %d fields", len(pick), len(outFields))
	}
	for j, i := range pick {
		if i < 0 || i >= len(inFields) {
			return nil, fmt.Errorf("format: projection: field %q picks input field %d of %d", outFields[j].Name(), i, len(inFields))
		}
		if inFields[i].Type().Fingerprint() != outFields[j].Type().Fingerprint() {
			return nil, fmt.Errorf("format: projection: field %q does not have the type of input field %q", outFields[j].Name(), inFields[i].Name())
		}
	}
	p := &AvroProjection{In: inRec, Out: outRec, Pick: pick, outFP: outRec.Fingerprint()}
	p.scan = make([]scanFn, len(inFields))
	for i, f := range inFields {
		fn, err := compileScan(f.Type(), f.Name(), 0, false)
		if err != nil {
			return nil, err
		}
		p.scan[i] = fn
	}
	return p, nil
}

// AvroRow is one record of a projection: its Avro body and where its In
// fields end. Scan fills it; the writers read it.
type AvroRow struct {
	P    *AvroProjection
	Body []byte
	// Ends[i] is where In field i ends in Body (it begins at Ends[i-1], the
	// first at 0).
	Ends []int
}

// Scan checks that body is a record of p.In and finds its fields. Bytes
// after the record are ignored, as the generic decoder ignores them. An
// error wraps ErrBadValue; row then holds nothing usable.
func (p *AvroProjection) Scan(row *AvroRow, body []byte) error {
	row.P, row.Body = p, body
	if cap(row.Ends) < len(p.scan) {
		row.Ends = make([]int, len(p.scan))
	}
	row.Ends = row.Ends[:len(p.scan)]
	i := 0
	for k, fn := range p.scan {
		var err error
		if i, err = fn(body, i); err != nil {
			return fmt.Errorf("%w: avro: field %q: %v", ErrBadValue, p.In.Fields()[k].Name(), err)
		}
		row.Ends[k] = i
	}
	return nil
}

// field returns the bytes of In field i.
func (r *AvroRow) field(i int) []byte {
	start := 0
	if i > 0 {
		start = r.Ends[i-1]
	}
	return r.Body[start:r.Ends[i]]
}

// start returns where In field i begins.
func (r *AvroRow) start(i int) int {
	if i == 0 {
		return 0
	}
	return r.Ends[i-1]
}

// InValue decodes In field i as the generic decoder does (the value a
// map[string]any row would hold).
func (r *AvroRow) InValue(i int) (any, error) {
	var v any
	if err := avro.Unmarshal(r.P.In.Fields()[i].Type(), r.field(i), &v); err != nil {
		return nil, fmt.Errorf("%w: avro: field %q: %v", ErrBadValue, r.P.In.Fields()[i].Name(), err)
	}
	return v, nil
}

// InIndex returns the index of the In field called name, or -1.
func (p *AvroProjection) InIndex(name string) int {
	for i, f := range p.In.Fields() {
		if f.Name() == name {
			return i
		}
	}
	return -1
}

// InTime reads In field i as a time without decoding anything else, when
// it is a timestamp or date (as such), or a long or int (epoch
// milliseconds), plain or in a ["null", T] union: what partitioning by a
// record field needs. ok is false for null and for other types.
func (r *AvroRow) InTime(i int) (t time.Time, ok bool) {
	s := deref(r.P.In.Fields()[i].Type())
	b := r.field(i)
	if u, isUnion := s.(*avro.UnionSchema); isUnion {
		idx, n, err := readLong(b, 0)
		if err != nil || idx < 0 || int(idx) >= len(u.Types()) {
			return time.Time{}, false
		}
		s, b = deref(u.Types()[idx]), b[n:]
	}
	if s.Type() != avro.Long && s.Type() != avro.Int {
		return time.Time{}, false
	}
	n, _, err := readLong(b, 0)
	if err != nil {
		return time.Time{}, false
	}
	if ls := logicalOf(s); ls != nil {
		switch ls.Type() {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return time.UnixMilli(n).UTC(), true
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return time.UnixMicro(n).UTC(), true
		case avro.Date:
			return time.Unix(n*86400, 0).UTC(), true
		}
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// Map decodes the row as a map of Out's field names (the slow path, for
// writers that take maps).
func (r *AvroRow) Map() (map[string]any, error) {
	out := make(map[string]any, len(r.P.Pick))
	for j, i := range r.P.Pick {
		v, err := r.InValue(i)
		if err != nil {
			return nil, err
		}
		out[r.P.Out.Fields()[j].Name()] = v
	}
	return out, nil
}

// Reading Avro binary. Longs and ints are zig-zag varints.

// readVarint reads an unsigned varint of at most max bytes at b[i:].
func readVarint(b []byte, i, max int) (uint64, int, error) {
	var u uint64
	for n := 0; n < max; n++ {
		if i >= len(b) {
			return 0, i, errAvroShort
		}
		c := b[i]
		i++
		u |= uint64(c&0x7f) << (7 * n)
		if c < 0x80 {
			return u, i, nil
		}
	}
	return 0, i, fmt.Errorf("varint is longer than %d bytes", max)
}

// zigzag64 and zigzag32 decode Avro's zig-zag coding; an int keeps the low
// 32 bits of its varint, as the generic decoder does.
func zigzag64(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
func zigzag32(u uint64) int32 { v := uint32(u); return int32(v>>1) ^ -int32(v&1) }

// readLong reads a long (at most 10 bytes) at b[i:].
func readLong(b []byte, i int) (int64, int, error) {
	u, i, err := readVarint(b, i, 10)
	return zigzag64(u), i, err
}

// readInt reads an int (at most 5 bytes) at b[i:].
func readInt(b []byte, i int) (int32, int, error) {
	u, i, err := readVarint(b, i, 5)
	return zigzag32(u), i, err
}

// varintAt reads a varint the scan has checked.
func varintAt(b []byte, i int) (uint64, int) {
	var u uint64
	for s := uint(0); ; s += 7 {
		c := b[i]
		i++
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return u, i
		}
	}
}

// longAt and intAt read a long and an int the scan has checked.
func longAt(b []byte, i int) (int64, int) {
	u, i := varintAt(b, i)
	return zigzag64(u), i
}

func intAt(b []byte, i int) (int32, int) {
	u, i := varintAt(b, i)
	return zigzag32(u), i
}

// readBytes reads the length of a string or bytes value at b[i:] and
// returns where its content begins and ends.
func readBytes(b []byte, i int) (int, int, error) {
	n, i, err := readLong(b, i)
	if err != nil {
		return 0, i, err
	}
	if n < 0 {
		return 0, i, fmt.Errorf("negative length %d", n)
	}
	if n > maxAvroBytes {
		return 0, i, fmt.Errorf("a value of %d bytes is over the limit of %d", n, maxAvroBytes)
	}
	if n > int64(len(b)-i) {
		return 0, i, errAvroShort
	}
	return i, i + int(n), nil
}

// compileScan builds the checker of one value of s. strict adds what
// Parquet needs beyond well-formed Avro: decimals within 38 digits and
// uuids that parse.
func compileScan(s avro.Schema, path string, depth int, strict bool) (scanFn, error) {
	if depth > 64 {
		return nil, fmt.Errorf("%w: field %q: nested more than 64 deep", ErrUnsupportedSchema, path)
	}
	s = deref(s)
	if ls := logicalOf(s); ls != nil && strict {
		switch ls.Type() {
		case avro.Decimal:
			return scanDecimal(s, path)
		case avro.UUID:
			if s.Type() == avro.String {
				return scanUUID, nil
			}
		}
	}
	switch s.Type() {
	case avro.Null:
		return func(_ []byte, i int) (int, error) { return i, nil }, nil
	case avro.Boolean:
		return func(b []byte, i int) (int, error) {
			if i >= len(b) {
				return i, errAvroShort
			}
			if b[i] > 1 {
				return i, fmt.Errorf("invalid boolean byte 0x%02x", b[i])
			}
			return i + 1, nil
		}, nil
	case avro.Int:
		return func(b []byte, i int) (int, error) {
			_, i, err := readInt(b, i)
			return i, err
		}, nil
	case avro.Long:
		return func(b []byte, i int) (int, error) {
			_, i, err := readLong(b, i)
			return i, err
		}, nil
	case avro.Float:
		return fixedScan(4), nil
	case avro.Double:
		return fixedScan(8), nil
	case avro.String, avro.Bytes:
		return func(b []byte, i int) (int, error) {
			_, end, err := readBytes(b, i)
			return end, err
		}, nil
	case avro.Fixed:
		return fixedScan(s.(*avro.FixedSchema).Size()), nil
	case avro.Enum:
		n := int32(len(s.(*avro.EnumSchema).Symbols()))
		return func(b []byte, i int) (int, error) {
			x, i, err := readInt(b, i)
			if err == nil && (x < 0 || x >= n) {
				err = fmt.Errorf("enum index %d is not one of the %d symbols", x, n)
			}
			return i, err
		}, nil
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
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
	case avro.Record:
		var fns []scanFn
		for _, f := range s.(*avro.RecordSchema).Fields() {
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
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		item, err := compileScan(items, path+"[]", depth+1, strict)
		if err != nil {
			return nil, err
		}
		if minSize(items, 0) == 0 {
			return nil, fmt.Errorf("%w: %w: field %q", ErrUnsupportedSchema, ErrUnboundedItems, path)
		}
		return blocksScan(nil, item), nil
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		val, err := compileScan(values, path+"{}", depth+1, strict)
		if err != nil {
			return nil, err
		}
		key := func(b []byte, i int) (int, error) {
			_, end, err := readBytes(b, i)
			return end, err
		}
		return blocksScan(key, val), nil
	}
	return nil, fmt.Errorf("%w: field %q: Avro type %s", ErrUnsupportedSchema, path, s.Type())
}

func fixedScan(n int) scanFn {
	return func(b []byte, i int) (int, error) {
		if n > len(b)-i {
			return i, errAvroShort
		}
		return i + n, nil
	}
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
	s = deref(s)
	if depth > 64 {
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

// needsStrict reports whether s holds a decimal or a uuid anywhere.
func needsStrict(s avro.Schema, depth int) bool {
	s = deref(s)
	if depth > 64 {
		return false
	}
	if ls := logicalOf(s); ls != nil && (ls.Type() == avro.Decimal || ls.Type() == avro.UUID) {
		return true
	}
	switch t := s.(type) {
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			if needsStrict(b, depth+1) {
				return true
			}
		}
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			if needsStrict(f.Type(), depth+1) {
				return true
			}
		}
	case *avro.ArraySchema:
		return needsStrict(t.Items(), depth+1)
	case *avro.MapSchema:
		return needsStrict(t.Values(), depth+1)
	}
	return false
}

func scanDecimal(s avro.Schema, path string) (scanFn, error) {
	d, _ := logicalOf(s).(*avro.DecimalLogicalSchema)
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
				return i, i, errAvroShort
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

func scanUUID(b []byte, i int) (int, error) {
	start, end, err := readBytes(b, i)
	if err != nil {
		return end, err
	}
	if _, err := uuid.ParseBytes(b[start:end]); err != nil {
		return end, fmt.Errorf("uuid: %v", err)
	}
	return end, nil
}
