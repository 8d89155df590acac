package avrocodec

import (
	"fmt"
	"time"

	"github.com/hamba/avro/v2"
)

// Projection reads records written in Avro binary with the schema In as
// rows of the schema Out, whose fields are fields of In, all of them
// (identity) or some, renamed and reordered (select). It is safe for
// concurrent use; a Row is not.
type Projection struct {
	In, Out *avro.RecordSchema
	// Pick maps Out's fields to In's: Out field j is In field Pick[j].
	Pick []int
	scan []scanFn // per In field
}

// NewProjection compiles the projection of in onto out. pick nil is the
// identity (out must then be in, or nil). Each Out field must have the
// type of the In field it comes from. A schema the scan cannot bound (an
// array of items that take no bytes, a record that contains itself) is an
// error wrapping ErrUnsupportedSchema.
func NewProjection(in, out avro.Schema, pick []int) (*Projection, error) {
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
	if name, ok := SelfContaining(inRec); ok {
		return nil, fmt.Errorf("%w: record %s contains itself: the columnar path takes finite schemas", ErrUnsupportedSchema, name)
	}
	inFields, outFields := inRec.Fields(), outRec.Fields()
	if pick == nil {
		if len(outFields) != len(inFields) {
			return nil, fmt.Errorf("avrocodec: projection: identity needs the same fields (%d in, %d out)", len(inFields), len(outFields))
		}
		pick = make([]int, len(inFields))
		for i := range pick {
			pick[i] = i
		}
	}
	if len(pick) != len(outFields) {
		return nil, fmt.Errorf("avrocodec: projection: %d picks for %d fields", len(pick), len(outFields))
	}
	for j, i := range pick {
		if i < 0 || i >= len(inFields) {
			return nil, fmt.Errorf("avrocodec: projection: field %q picks input field %d of %d", outFields[j].Name(), i, len(inFields))
		}
		if inFields[i].Type().Fingerprint() != outFields[j].Type().Fingerprint() {
			return nil, fmt.Errorf("avrocodec: projection: field %q does not have the type of input field %q", outFields[j].Name(), inFields[i].Name())
		}
	}
	p := &Projection{In: inRec, Out: outRec, Pick: pick}
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

// Row is one record of a projection: its Avro body and where its In fields
// end. Scan fills it; the writers read it. A Row refers to the body it was
// scanned from (it copies nothing), so the body must stay unchanged while
// the row is in use.
type Row struct {
	P    *Projection
	Body []byte
	// Ends[i] is where In field i ends in Body (it begins at Ends[i-1], the
	// first at 0).
	Ends []int
}

// Scan checks that body is a record of p.In and finds its fields. Bytes
// after the record are ignored, as the generic decoder ignores them. An
// error wraps ErrBadValue; row then holds nothing usable.
func (p *Projection) Scan(row *Row, body []byte) error {
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

// Field returns the Avro bytes of In field i.
func (r *Row) Field(i int) []byte {
	return r.Body[r.Start(i):r.Ends[i]]
}

// Start returns where In field i begins in Body.
func (r *Row) Start(i int) int {
	if i == 0 {
		return 0
	}
	return r.Ends[i-1]
}

// InValue decodes In field i as the generic decoder does (the value a
// map[string]any row would hold).
func (r *Row) InValue(i int) (any, error) {
	var v any
	if err := avro.Unmarshal(r.P.In.Fields()[i].Type(), r.Field(i), &v); err != nil {
		return nil, fmt.Errorf("%w: avro: field %q: %v", ErrBadValue, r.P.In.Fields()[i].Name(), err)
	}
	return v, nil
}

// InIndex returns the index of the In field called name, or -1.
func (p *Projection) InIndex(name string) int {
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
func (r *Row) InTime(i int) (t time.Time, ok bool) {
	s := Deref(r.P.In.Fields()[i].Type())
	b := r.Field(i)
	if u, isUnion := s.(*avro.UnionSchema); isUnion {
		idx, n, err := readLong(b, 0)
		if err != nil || idx < 0 || int(idx) >= len(u.Types()) {
			return time.Time{}, false
		}
		s, b = Deref(u.Types()[idx]), b[n:]
	}
	if s.Type() != avro.Long && s.Type() != avro.Int {
		return time.Time{}, false
	}
	n, _, err := readLong(b, 0)
	if err != nil {
		return time.Time{}, false
	}
	if ls := Logical(s); ls != nil {
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
func (r *Row) Map() (map[string]any, error) {
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
