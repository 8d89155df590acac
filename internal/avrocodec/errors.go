package avrocodec

import (
	"errors"
	"fmt"
)

// ErrBadValue reports a record value that does not fit its schema: Avro
// binary that is not a record of it (Scan), or a generic value of the
// wrong type (the appenders, the normalizers). The file writers of
// writers/format return it too: a record refused for its value, never for
// its file.
var ErrBadValue = errors.New("avrocodec: value does not fit the schema")

// ErrUnsupportedSchema reports an Avro schema (or part of one) that the
// codec cannot take: no faithful Arrow (Parquet) equivalent, or a shape a
// scan cannot bound (a record that contains itself, nesting past 64).
var ErrUnsupportedSchema = errors.New("avrocodec: unsupported schema")

// ErrUnboundedItems (with ErrUnsupportedSchema) refuses an array whose items
// take no bytes (records without fields): its count alone, a few bytes,
// could ask for any amount of work, and arrays of them multiply it.
var ErrUnboundedItems = errors.New("avrocodec: an array of items that take no bytes")

// BadValue is an ErrBadValue naming the field (path), the value and the
// type it should have been.
func BadValue(path string, v any, want string) error {
	return fmt.Errorf("%w: field %q: got %T (%v), want %s", ErrBadValue, path, v, clip(v), want)
}

// clip is v as text, cut at 60 bytes: an error quotes a value, not a
// record's worth of it.
func clip(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
