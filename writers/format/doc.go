// Package format writes the records of one file as Parquet, Avro object
// container or JSON lines. Records are maps of field name to value, typed by
// an Avro record schema, or Avro binary rows an avrocodec.Projection has
// scanned (AvroRowWriter: Parquet decodes them into its columns with
// avrocodec.Columns, Avro copies their bytes); optional metadata columns
// (_topic, _partition, _offset, _timestamp) say where each record came
// from. It only writes: reading Avro, and the conversions of Avro values to
// Arrow, are package internal/avrocodec's.
//
//	record (map[string]any, or *avrocodec.Row) + Meta
//	                                     │
//	                                     ▼
//	                                  Writer ──► io.Writer (an FS file)
//	                                     │
//	     ┌───────────────────────────────┼──────────────────────────────┐
//	     ▼                               ▼                              ▼
//	Parquet (pqarrow)               Avro OCF (hamba)              JSON lines
//	"PAR1"                          "Obj\x01" header:             {"a":1,...}\n
//	row group 0 (RowGroupRows)        avro.schema, avro.codec,    {"a":2,...}\n
//	  column chunk per leaf           16-byte sync marker         (optionally one
//	  (pages, dictionary for text)  block: count, size,            gzip or zstd
//	row group 1 ...                   compressed records, sync     stream)
//	footer: schema, logical types,  block ...
//	  ARROW:schema, stats; "PAR1"
//
// # Types (Avro → Parquet, see avrocodec.ArrowSchema)
//
// Timestamps keep their Avro unit as TIMESTAMP(MILLIS|MICROS,
// isAdjustedToUTC=true) — never nanoseconds, which Spark, Hive and older
// readers reject; dates are DATE, decimals DECIMAL(p,s), UUIDs UUID;
// records become groups, arrays LIST, maps MAP; ["null", T] is an optional
// T. A union of two non-null types has no Parquet form and is refused with
// avrocodec.ErrUnsupportedSchema naming the field. Avro files carry the
// schema itself (plus the metadata fields when enabled); JSON lines write
// timestamps as RFC 3339 text in UTC, decimals as exact numbers, bytes as
// base64.
//
// # Values
//
// Values are what hamba/avro decodes generically (time.Time, *big.Rat,
// []any, map[string]any, unions plain or as {"type": value}) or what
// encoding/json decodes (float64, text timestamps and decimals): both are
// accepted. A value that does not fit is an avrocodec.ErrBadValue (the
// error a scan of bad Avro binary returns too); the record is not
// written and the file stays valid.
//
// # Compression
//
// Parquet pages are compressed with zstd level 1 (the fastest level): on
// realistic page views it is as small as level 3 (27.2 against 28.2 bytes
// a record in BenchmarkWrite) and takes less CPU. Avro blocks and JSON-lines
// streams use the zstd library's default level.
//
// # Versioning
//
// Parquet files are format version 2.6 with the Arrow schema stored; Avro
// files are Avro 1.x object containers; the metadata column names are
// frozen.
package format
