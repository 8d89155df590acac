package avrocodec

import (
	"hash/maphash"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// StringDict is a top-level text column (string or enum, nullable or not)
// kept dictionary-encoded while it is decoded: each value is looked up
// among the distinct values appended since the last Reset, and only its
// index is appended. The Parquet writer's text columns so reach arrow-go
// already as dictionaries: no copy of each value into a string builder,
// no second pass that hashes them again at the row group's end.
//
// The distinct values are kept one after the other in one byte slice, and
// found through an open-addressing table of 16-byte slots that hold a
// value's hash tag, index, offset and length: a lookup touches one slot
// and, when the tags match, the value's bytes (a Go map of strings would
// also read the key's header and allocate each new key).
//
// A column that turns out mostly distinct is not worth a dictionary: once
// more than Probe values have been appended since Reset, a new distinct
// value that makes more than half of them distinct ends the dictionary
// (GiveUp) — the values so far are copied into the column's plain
// builder, and from then until Reset every value goes there. GiveUp may
// also be called by the owner (a row of the map path, which appends to the
// plain builder itself).
//
// Not safe for concurrent use.
type StringDict struct {
	// Probe is how many values may be appended before a new distinct value
	// may end the dictionary (0: the dictionary never ends by itself).
	Probe int

	mem      memory.Allocator
	plain    *array.StringBuilder // the column's builder: where values go once given up
	seed     maphash.Seed
	slots    []dictSlot          // power-of-two length, at most half full; tag 0: empty
	data     []byte              // the distinct values, in order of first sight
	offs     []int32             // value k is data[offs[k]:offs[k+1]]; offs[0] = 0
	indices  *array.Int32Builder // one a row; null for a null
	given    bool                // given up since Reset
	distinct bool                // given up because the values were mostly distinct
}

// dictSlot is one entry of the lookup table. tag is the value's hash with
// its low bit set (so never 0, the empty slot's).
type dictSlot struct {
	tag      uint32
	idx      int32
	off, len uint32
}

// NewStringDict returns an empty dictionary of the column whose plain
// builder is plain, allocating its indices from mem.
func NewStringDict(mem memory.Allocator, plain *array.StringBuilder, probe int) *StringDict {
	return &StringDict{Probe: probe, mem: mem, plain: plain, seed: maphash.MakeSeed(),
		slots: make([]dictSlot, 64), offs: []int32{0}, indices: array.NewInt32Builder(mem)}
}

// Append appends one value (a view of the record's bytes: it is copied
// only when it is new).
func (d *StringDict) Append(v []byte) {
	if d.given {
		d.plain.BinaryBuilder.Append(v)
		return
	}
	h := maphash.Bytes(d.seed, v)
	if k, ok := d.lookup(h, v); ok {
		d.indices.Append(k)
		return
	}
	d.insert(h, v, "")
}

// AppendString is Append for a value held as a string.
func (d *StringDict) AppendString(v string) {
	if d.given {
		d.plain.Append(v)
		return
	}
	h := maphash.String(d.seed, v)
	if k, ok := d.lookup(h, unsafe.Slice(unsafe.StringData(v), len(v))); ok {
		d.indices.Append(k)
		return
	}
	d.insert(h, nil, v)
}

// lookup finds the index of v, whose hash is h.
func (d *StringDict) lookup(h uint64, v []byte) (int32, bool) {
	tag := uint32(h>>32) | 1
	mask := uint64(len(d.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &d.slots[i]
		if s.tag == 0 {
			return 0, false
		}
		if s.tag == tag && int(s.len) == len(v) && string(d.data[s.off:s.off+s.len]) == string(v) {
			return s.idx, true
		}
	}
}

// insert adds v (given as b, or as s when b is nil), not yet in d, and
// appends its index, unless it ends the dictionary (see Probe).
func (d *StringDict) insert(h uint64, b []byte, s string) {
	n := d.indices.Len()
	k := len(d.offs) - 1
	if d.Probe > 0 && n >= d.Probe && k > n/2 {
		// More than half distinct with this one: not worth it.
		d.distinct = true
		d.GiveUp()
		if b != nil {
			d.plain.BinaryBuilder.Append(b)
		} else {
			d.plain.Append(s)
		}
		return
	}
	if 2*(k+1) > len(d.slots) {
		d.grow()
	}
	off := len(d.data)
	if b != nil {
		d.data = append(d.data, b...)
	} else {
		d.data = append(d.data, s...)
	}
	d.offs = append(d.offs, int32(len(d.data)))
	d.place(dictSlot{tag: uint32(h>>32) | 1, idx: int32(k), off: uint32(off), len: uint32(len(d.data) - off)}, h)
	d.indices.Append(int32(k))
}

// place puts s, of hash h, in its slot.
func (d *StringDict) place(s dictSlot, h uint64) {
	mask := uint64(len(d.slots) - 1)
	i := h & mask
	for d.slots[i].tag != 0 {
		i = (i + 1) & mask
	}
	d.slots[i] = s
}

// grow doubles the table and places the values again.
func (d *StringDict) grow() {
	old := d.slots
	d.slots = make([]dictSlot, 2*len(old))
	for _, s := range old {
		if s.tag != 0 {
			d.place(s, maphash.Bytes(d.seed, d.data[s.off:s.off+s.len]))
		}
	}
}

// AppendNull appends a null.
func (d *StringDict) AppendNull() {
	if d.given {
		d.plain.AppendNull()
		return
	}
	d.indices.AppendNull()
}

// GiveUp ends the dictionary until Reset: the rows appended so far are
// copied into the plain builder, in order, and the later ones go there.
func (d *StringDict) GiveUp() {
	if d.given {
		return
	}
	d.given = true
	n := d.indices.Len()
	if n == 0 {
		return
	}
	idx := d.indices.NewInt32Array()
	defer idx.Release()
	d.plain.Reserve(n)
	d.plain.ReserveData(len(d.data) * n / max(len(d.offs)-1, 1))
	for j := 0; j < n; j++ {
		if idx.IsNull(j) {
			d.plain.AppendNull()
			continue
		}
		k := idx.Value(j)
		d.plain.BinaryBuilder.Append(d.data[d.offs[k]:d.offs[k+1]])
	}
	d.clearValues()
}

// GivenUp reports whether the dictionary was given up since Reset, and
// whether because its values were mostly distinct.
func (d *StringDict) GivenUp() (given, mostlyDistinct bool) { return d.given, d.distinct }

// Len is the number of rows held as a dictionary (0 once given up: they
// are the plain builder's).
func (d *StringDict) Len() int { return d.indices.Len() }

// Distinct is the number of distinct values.
func (d *StringDict) Distinct() int { return len(d.offs) - 1 }

// Bytes estimates the memory the dictionary holds: its distinct values,
// their offsets and slots, and four bytes an index.
func (d *StringDict) Bytes() int64 {
	return int64(len(d.data)) + 4*int64(len(d.offs)) + 16*int64(len(d.slots)) + 4*int64(d.indices.Len())
}

// Reserve makes room for n more rows.
func (d *StringDict) Reserve(n int) { d.indices.Reserve(n) }

// NewArray returns the rows held (Len of them) as an Arrow dictionary
// array of int32 indices into string values, and resets d. After GiveUp it
// returns nil (the rows are the plain builder's) and resets d too. The
// values are copied out (the distinct ones only), so the array outlives
// whatever d does next.
func (d *StringDict) NewArray() *array.Dictionary {
	defer d.Reset()
	if d.given {
		return nil
	}
	idx := d.indices.NewArray()
	defer idx.Release()
	vb := array.NewStringBuilder(d.mem)
	defer vb.Release()
	vb.Reserve(len(d.offs) - 1)
	vb.ReserveData(len(d.data))
	for k := 0; k+1 < len(d.offs); k++ {
		vb.BinaryBuilder.Append(d.data[d.offs[k]:d.offs[k+1]])
	}
	vals := vb.NewArray()
	defer vals.Release()
	return array.NewDictionaryArray(DictType, idx, vals)
}

// Reset empties d and starts a new dictionary: Parquet dictionaries are a
// row group's.
func (d *StringDict) Reset() {
	if d.indices.Len() > 0 {
		d.indices.NewArray().Release()
	}
	d.clearValues()
	d.given, d.distinct = false, false
}

// clearValues forgets the distinct values, keeping the memory.
func (d *StringDict) clearValues() {
	if len(d.offs) > 1 {
		clear(d.slots)
	}
	d.data = d.data[:0]
	d.offs = d.offs[:1]
}

// Release frees the builders.
func (d *StringDict) Release() {
	d.indices.Release()
}

// DictType is the Arrow type of a StringDict's arrays.
var DictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
