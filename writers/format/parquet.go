package format

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

type parquetWriter struct {
	cw *countingWriter
	fw *pqarrow.FileWriter // made by start
	// wprops are the file's properties, until start adds its dictionary
	// choices.
	wprops []parquet.WriterProperty
	rb     *array.RecordBuilder
	mem    *sharedPool
	closed bool
	// apps put a map record's fields into the top-level builders.
	apps *avrocodec.Appenders
	// dict holds, per column written as a dictionary, the map of its
	// values to their indices for a row group that reaches the flush as
	// plain strings (nil for the other columns).
	dict []map[string]int32
	// sdict holds, per column written as a dictionary, the dictionary the
	// rows fill as they are appended (the columnar path's decoders and the
	// metadata column _topic); the map path gives it up for the row group
	// (its appenders fill the plain builders). nil for the other columns.
	sdict    []*avrocodec.StringDict
	fp       [32]byte // of the record schema
	colsFP   string   // of the file's Arrow schema (ColumnsFingerprint)
	nfields  int
	meta     bool
	rowCol   bool // the _row column (Options.RowColumn)
	tsMicros bool
	groupLen int
	// groupBytes ends a row group early once the builders hold this much
	// (estimated): what one open file may buffer.
	groupBytes int64
	// avro: the column decoders of the projections written so far (the
	// columnar path), by projection.
	avro    map[*avrocodec.Projection]*avrocodec.Columns
	pending int
	records int64
	flushed int64 // rows in written row groups
}

// ColumnsFingerprint names the file's column schema: the first 8 bytes of
// the SHA-256 of its Arrow schema (names, types, nullability, nesting), from
// which its Parquet schema is made. Files of one fingerprint have the same
// columns.
func (p *parquetWriter) ColumnsFingerprint() string { return p.colsFP }

// zstdLevel is the zstd level of Parquet pages: 1 (klauspost's
// SpeedFastest). On realistic page views it costs a few percent of size
// against level 3 (the library default) and saves most of the compression
// time.
const zstdLevel = 1

func parquetCodec(c string) compress.Compression {
	switch c {
	case "none", "uncompressed":
		return compress.Codecs.Uncompressed
	case "snappy":
		return compress.Codecs.Snappy
	case "gzip":
		return compress.Codecs.Gzip
	}
	return compress.Codecs.Zstd
}

func newParquetWriter(w io.Writer, schema avro.Schema, opts Options) (*parquetWriter, error) {
	as, err := avrocodec.ArrowSchema(schema)
	if err != nil {
		return nil, err
	}
	rec := schema.(*avro.RecordSchema)
	fields := as.Fields()
	nfields := len(fields)
	if opts.MetadataColumns {
		unit := arrow.Millisecond
		if opts.TimestampMicros {
			unit = arrow.Microsecond
		}
		for _, f := range fields {
			if opts.metaClash(f.Name) {
				return nil, fmt.Errorf("%w: field %q clashes with a metadata column", avrocodec.ErrUnsupportedSchema, f.Name)
			}
		}
		fields = append(fields,
			arrow.Field{Name: ColTopic, Type: arrow.BinaryTypes.String},
			arrow.Field{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
			arrow.Field{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
			arrow.Field{Name: ColTimestamp, Type: &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}},
		)
		if opts.rowColumn() {
			fields = append(fields, arrow.Field{Name: ColRow, Type: arrow.PrimitiveTypes.Int32})
		}
	}
	as = arrow.NewSchema(fields, nil)
	groupLen := opts.RowGroupRows
	if groupLen <= 0 {
		groupLen = 128 * 1024
	}
	groupBytes := opts.RowGroupBytes
	if groupBytes <= 0 {
		groupBytes = 128 << 20
	}
	// Dictionary encoding pays off on text; on numbers and timestamps
	// (mostly distinct) it costs time and falls back to plain anyway.
	wprops := []parquet.WriterProperty{
		parquet.WithCompression(parquetCodec(opts.Compression)),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(int64(groupLen)),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithCreatedBy("sluice"),
	}
	var dictCols []string
	if !opts.NoDictionary {
		for _, f := range fields {
			if f.Type.ID() == arrow.STRING || f.Type.ID() == arrow.BINARY {
				wprops = append(wprops, parquet.WithDictionaryFor(f.Name, true))
				dictCols = append(dictCols, f.Name)
			}
		}
	}
	for _, f := range fields {
		if deltaColumn(f) {
			wprops = append(wprops, parquet.WithEncodingFor(f.Name, parquet.Encodings.DeltaBinaryPacked))
		}
	}
	if parquetCodec(opts.Compression) == compress.Codecs.Zstd {
		wprops = append(wprops, parquet.WithCompressionLevel(zstdLevel))
	}
	// The file writer is made at the first row group, when it is known
	// which text columns are worth a dictionary; the schema is checked now.
	if _, err := pqarrow.ToParquet(as, parquet.NewWriterProperties(wprops...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
		return nil, fmt.Errorf("format: parquet: %w", err)
	}
	cw := &countingWriter{w: w}
	mem := buffers
	mem.acquire()
	pw := &parquetWriter{
		cw: cw, wprops: wprops, rb: array.NewRecordBuilder(mem, as), mem: mem,
		fp: rec.Fingerprint(), nfields: nfields, meta: opts.MetadataColumns, rowCol: opts.rowColumn(),
		tsMicros: opts.TimestampMicros, groupLen: groupLen, groupBytes: groupBytes,
	}
	sum := sha256.Sum256([]byte(as.String()))
	pw.colsFP = "parquet:" + hex.EncodeToString(sum[:8])
	pw.dict = make([]map[string]int32, len(fields))
	pw.sdict = make([]*avrocodec.StringDict, len(fields))
	for i, f := range fields {
		if slices.Contains(dictCols, f.Name) && f.Type.ID() == arrow.STRING {
			pw.dict[i] = map[string]int32{}
			pw.sdict[i] = avrocodec.NewStringDict(mem, pw.rb.Field(i).(*array.StringBuilder), dictProbe)
		}
	}
	if pw.apps, err = avrocodec.NewAppenders(rec, pw.rb.Fields()); err != nil {
		pw.rb.Release()
		mem.release()
		return nil, err
	}
	return pw, nil
}

// deltaColumn reports whether a top-level column is written with
// DELTA_BINARY_PACKED: integers and times. Timestamps and offsets grow
// record by record and shrink to a few bits a value; on other integers it
// packs about as well as plain does after zstd, and either way zstd has
// less to do (on the page-view benchmark: 6% smaller files, about a fifth
// less CPU a record).
func deltaColumn(f arrow.Field) bool {
	switch f.Type.ID() {
	case arrow.INT32, arrow.INT64, arrow.TIMESTAMP, arrow.DATE32, arrow.TIME32, arrow.TIME64:
		return true
	}
	return false
}

func (p *parquetWriter) Write(value map[string]any, meta Meta) error {
	p.giveUpDicts() // the appenders fill the plain builders
	if err := p.apps.Append(value); err != nil {
		if rerr := p.recoverRow(); rerr != nil {
			// Writing the good rows failed: the output's error, not the
			// record's (err is only said).
			return fmt.Errorf("format: parquet: dropping a row that did not fit (%v): %w", err, rerr)
		}
		return err
	}
	p.appendMeta(meta)
	return p.rowDone()
}

func (p *parquetWriter) appendMeta(meta Meta) {
	if p.meta {
		n := p.nfields
		if d := p.sdict[n]; d != nil {
			d.AppendString(meta.Topic)
		} else {
			p.rb.Field(n).(*array.StringBuilder).Append(meta.Topic)
		}
		p.rb.Field(n + 1).(*array.Int32Builder).Append(meta.Partition)
		p.rb.Field(n + 2).(*array.Int64Builder).Append(meta.Offset)
		ts := meta.Timestamp.UnixMilli()
		if p.tsMicros {
			ts = meta.Timestamp.UnixMicro()
		}
		p.rb.Field(n + 3).(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
		if p.rowCol {
			p.rb.Field(n + 4).(*array.Int32Builder).Append(meta.Row)
		}
	}
}

func (p *parquetWriter) rowDone() error {
	p.pending++
	p.records++
	if p.pending >= p.groupLen || (p.pending%1024 == 0 && p.Buffered() >= p.groupBytes) {
		return p.flush()
	}
	return nil
}

// Buffered estimates the bytes of the rows not yet written, as the
// builders hold them: the text and binary data of the top-level columns
// plus 8 bytes a value of the others. writers.MemoryBudget adds them up
// over a process's open files.
func (p *parquetWriter) Buffered() int64 {
	var n int64
	for i, b := range p.rb.Fields() {
		if d := p.sdict[i]; d != nil {
			n += d.Bytes()
		}
		switch bb := b.(type) {
		case *array.StringBuilder:
			n += int64(bb.DataLen())
		case *array.BinaryBuilder:
			n += int64(bb.DataLen())
		}
		n += 8 * int64(b.Len())
	}
	return n
}

// FlushBuffered writes the buffered rows now, as a row group shorter than
// RowGroupRows (a writers.MemoryBudget asks it of the file that buffers
// the most).
func (p *parquetWriter) FlushBuffered() error { return p.flush() }

// columns returns the column decoders of proj's rows into the builders,
// compiled at its first row.
func (p *parquetWriter) columns(proj *avrocodec.Projection) (*avrocodec.Columns, error) {
	if c := p.avro[proj]; c != nil {
		return c, nil
	}
	if proj.Out.Fingerprint() != p.fp {
		return nil, fmt.Errorf("format: parquet: a row of schema %s in a file of another schema", proj.Out.FullName())
	}
	c, err := avrocodec.NewColumnsDict(proj, p.rb.Fields(), p.sdict[:p.nfields])
	if err != nil {
		return nil, err
	}
	if p.avro == nil {
		p.avro = map[*avrocodec.Projection]*avrocodec.Columns{}
	}
	p.avro[proj] = c
	return c, nil
}

// WriteAvroRow appends a row scanned by its projection, decoding its
// fields straight into the column builders.
func (p *parquetWriter) WriteAvroRow(row *avrocodec.Row, meta Meta) error {
	c, err := p.columns(row.P)
	if err != nil {
		return err
	}
	if err := c.Check(row); err != nil {
		return err
	}
	c.Append(row)
	p.appendMeta(meta)
	return p.rowDone()
}

// giveUpDicts moves the rows of the dictionaries into the plain builders:
// the rest of the row group goes there.
func (p *parquetWriter) giveUpDicts() {
	for _, d := range p.sdict {
		if d != nil {
			d.GiveUp()
		}
	}
}

// recoverRow drops a half-appended row: the good rows are written as a row
// group and the builders start empty.
func (p *parquetWriter) recoverRow() error {
	p.giveUpDicts()
	defer p.resetDicts()
	cols := make([]arrow.Array, len(p.rb.Fields()))
	for i, b := range p.rb.Fields() {
		a := b.NewArray()
		cols[i] = array.NewSlice(a, 0, int64(p.pending))
		a.Release()
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	n := p.pending
	p.pending = 0
	if n == 0 {
		return nil
	}
	rec := array.NewRecordBatch(p.rb.Schema(), cols, int64(n))
	defer rec.Release()
	p.flushed += int64(n)
	if err := p.start(); err != nil {
		return err
	}
	return p.fw.Write(rec)
}

// resetDicts starts the dictionaries of a new row group.
func (p *parquetWriter) resetDicts() {
	for _, d := range p.sdict {
		if d != nil {
			d.Reset()
		}
	}
}

// reserve sizes the top-level builders for a row group up front, so that
// they do not grow by doubling (and copying) row by row. A column with a
// dictionary reserves its indices (its plain builder fills only when the
// dictionary is given up).
func (p *parquetWriter) reserve(dataLens []int) {
	for i, b := range p.rb.Fields() {
		if d := p.sdict[i]; d != nil {
			d.Reserve(p.groupLen)
			continue
		}
		b.Reserve(p.groupLen)
		if sb, ok := b.(*array.StringBuilder); ok {
			n := 32 * p.groupLen
			if dataLens != nil && dataLens[i] > 0 {
				n = dataLens[i] + dataLens[i]/8
			}
			sb.ReserveData(n)
		}
	}
}

func (p *parquetWriter) flush() error {
	if p.pending == 0 {
		return nil
	}
	full := p.pending == p.groupLen
	fields := p.rb.Fields()
	var lens []int
	if full {
		lens = make([]int, len(fields))
		for i, b := range fields {
			if sb, ok := b.(*array.StringBuilder); ok {
				lens[i] = sb.DataLen()
			}
		}
	}
	// A column's rows are in its dictionary, or in its plain builder once
	// the dictionary was given up (mostly distinct values: then no
	// dictionary is tried again for this row group).
	cols := make([]arrow.Array, len(fields))
	distinct := make([]bool, len(fields))
	for i, b := range fields {
		if d := p.sdict[i]; d != nil {
			_, distinct[i] = d.GivenUp()
			if da := d.NewArray(); da != nil {
				b.NewArray().Release() // empty
				cols[i] = da
				continue
			}
		}
		cols[i] = b.NewArray()
	}
	p.flushed += int64(p.pending)
	p.pending = 0
	err := p.writeGroup(cols, distinct)
	// Released after the write, the arrays' buffers go back to p.mem and
	// the next row group's builders reuse them.
	for _, c := range cols {
		c.Release()
	}
	if full {
		p.reserve(lens)
	}
	if err != nil {
		return fmt.Errorf("format: parquet row group: %w", err)
	}
	return nil
}

// writeGroup writes cols as a row group. The dictionary columns go as
// Arrow dictionary arrays: arrow-go's Parquet dictionary encoder, given
// plain strings, boxes every value into an interface for its hash table
// (an allocation a value, a third of a page view's Parquet CPU); given a
// dictionary it hashes the distinct values once and takes the indices as
// they are. Most come as dictionaries already (a StringDict filled while
// the rows were appended); a column that reaches it as plain strings (the
// map path's) is encoded here with a Go map, unless distinct says that its
// dictionary was given up for mostly distinct values. cols[i] is replaced
// (and released) when it is encoded here.
func (p *parquetWriter) writeGroup(cols []arrow.Array, distinct []bool) error {
	for i, col := range cols {
		if p.dict[i] == nil || distinct[i] {
			continue
		}
		if sc, ok := col.(*array.String); ok {
			if d := p.dictionary(p.dict[i], sc); d != nil {
				col.Release()
				cols[i] = d
			}
		}
	}
	if p.fw == nil {
		// The first row group decides: a column of mostly distinct values
		// goes without a dictionary in this file.
		for i, col := range cols {
			if p.dict[i] == nil || col.DataType().ID() == arrow.DICTIONARY {
				continue
			}
			p.dict[i] = nil
			if p.sdict[i] != nil {
				p.sdict[i].Release()
				p.sdict[i] = nil
				p.avro = nil // the column decoders are compiled again without it
			}
			p.wprops = append(p.wprops, parquet.WithDictionaryFor(p.rb.Schema().Field(i).Name, false))
		}
	}
	if err := p.start(); err != nil {
		return err
	}
	if err := p.fw.NewRowGroupChecked(); err != nil {
		return err
	}
	for _, col := range cols {
		if err := p.fw.WriteColumnData(col); err != nil {
			return err
		}
	}
	return nil
}

// start makes the file writer, once.
func (p *parquetWriter) start() error {
	if p.fw != nil {
		return nil
	}
	fw, err := pqarrow.NewFileWriter(p.rb.Schema(), p.cw, parquet.NewWriterProperties(p.wprops...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return fmt.Errorf("format: parquet: %w", err)
	}
	p.fw = fw
	return nil
}

// dictProbe is how many values of a row group's column decide whether it
// is worth a dictionary (more than half of them distinct: not).
const dictProbe = 16384

// dictionary encodes col: memo maps each distinct value to its index (it is
// cleared first: Parquet dictionaries are per row group). It returns nil
// for a column of mostly distinct values.
func (p *parquetWriter) dictionary(memo map[string]int32, col *array.String) *array.Dictionary {
	clear(memo)
	idx := array.NewInt32Builder(p.mem)
	defer idx.Release()
	vals := array.NewStringBuilder(p.mem)
	defer vals.Release()
	n := col.Len()
	idx.Reserve(n)
	for j := 0; j < n; j++ {
		if col.IsNull(j) {
			idx.UnsafeAppendBoolToBitmap(false)
			continue
		}
		v := col.Value(j) // a view of the column's buffer
		k, ok := memo[v]
		if !ok {
			if j >= dictProbe && len(memo) > j/2 {
				// Mostly distinct values: the dictionary would cost more
				// than it saves; the column goes as it is.
				return nil
			}
			k = int32(vals.Len())
			vals.Append(v)
			memo[strings.Clone(v)] = k
		}
		idx.UnsafeAppend(k)
	}
	ia, va := idx.NewArray(), vals.NewArray()
	defer ia.Release()
	defer va.Release()
	return array.NewDictionaryArray(avrocodec.DictType, ia, va)
}

func (p *parquetWriter) Records() int64 { return p.records }

// Bytes is the bytes written plus the pending rows at the average size of
// the written ones (or 64 bytes a row before the first row group).
func (p *parquetWriter) Bytes() int64 {
	per := int64(64)
	if p.flushed > 0 {
		per = max(1, p.cw.n/p.flushed)
	}
	return p.cw.n + int64(p.pending)*per
}

func (p *parquetWriter) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.flush()
	for _, d := range p.sdict {
		if d != nil {
			d.Release()
		}
	}
	p.rb.Release()
	p.mem.release()
	if serr := p.start(); serr != nil {
		return errors.Join(err, serr)
	}
	return errors.Join(err, p.fw.Close())
}
