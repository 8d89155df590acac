// Package avrocodec reads Avro records for the loader and converts Avro
// values to Arrow: the codec that jobs (decoding, where, select) and
// writers/format (the files) share. It checks Avro binary once and reads
// fields where they lie (Projection, Row), decodes them straight into Arrow
// column builders (Columns), appends generic values (maps as hamba/avro or
// encoding/json decode them) to the same builders (Appenders,
// RecordBuilder), and maps Avro schemas to Arrow schemas (ArrowSchema).
//
// # The binary layout it checks
//
// A record is its fields' values one after the other, with no framing
// (Avro 1.x binary encoding; the framing — a registry's 0x00 and schema
// id, a container file's blocks — is the caller's):
//
//	long, int       zig-zag varint, 7 bits a byte, low group first, a set
//	                high bit: another byte follows
//	                1xxxxxxx 1xxxxxxx … 0xxxxxxx   (at most 10 bytes; int 5)
//	boolean         one byte, 0x00 or 0x01
//	float, double   4 or 8 bytes, little-endian IEEE 754
//	string, bytes   long n ≥ 0, then n bytes      (n ≤ 1 MiB)
//	fixed(n)        n bytes
//	enum            int index < number of symbols
//	union           long index < number of branches, then that branch's value
//	record          each field's value in schema order
//	array, map      blocks:  count c │ [if c < 0: long byte size, c = -c] │
//	                         c items (map: string key, then value) │ … │ 0
//	decimal         bytes or fixed: big-endian two's complement, unscaled
//	date, time-millis: int; time-micros, timestamp-*: long; uuid: string
//
// Scan accepts exactly the bytes hamba/avro's generic decoder accepts
// (except ints over 5 bytes, which Java's reader refuses too), and the
// columns get the values the generic map path gives: the differential
// tests in writers/format hold the two paths to the same files.
//
// # What is bounded, and why
//
// The bytes come from Kafka: any producer's. A scan's work and memory are
// bounded by the record's size, never by a count inside it:
//
//   - a string or bytes value is at most 1 MiB (hamba's generic limit, so
//     both paths refuse the same records) and must fit the bytes left;
//   - a block count must not exceed the bytes left: every item takes one
//     byte at least — a schema whose array items take none (records
//     without fields) is refused up front with ErrUnboundedItems, since a
//     two-byte count of them would be any amount of work;
//   - types nest at most 64 deep, and a record that contains itself is
//     refused (ErrUnsupportedSchema): compiling it would not end;
//   - a scan allocates nothing but the Row's Ends (one int a field,
//     reused); the column decoders read only what a scan accepted, so they
//     carry no checks of their own and cannot run past the record.
//
// # One table of scalar types
//
// Every Avro scalar (a primitive, or a logical type over one) is one row of
// the scalar table (scalars.go): its Arrow type, its binary check, its
// strict check (what Parquet needs beyond well-formed Avro: a decimal of at
// most 38 digits, a uuid that parses), its column decoder, its appender of
// generic values, its normalization for the Avro encoder, its JSON form.
// Both walks over the binary (compileScan, compileCol) and the map path
// (compile) take scalars from it; the structural types (record, array,
// map, union) are where the walks recurse. Adding a logical type is adding
// a row: TestScalarTableDrivesBothWalks fails on a row that lacks a column
// or whose columns disagree.
//
// # Use
//
//	p, err := avrocodec.NewProjection(writerSchema, nil, nil) // identity
//	var row avrocodec.Row
//	if err := p.Scan(&row, body); err != nil { … }         // ErrBadValue
//	t, ok := row.InTime(i)        // a field read in place
//	err = parquetWriter.WriteAvroRow(&row, meta) // avrocodec.Columns inside
//
// A Row refers to the body it was scanned from: a record crosses from the
// reader to the file writer once, as the bytes Kafka returned.
package avrocodec
