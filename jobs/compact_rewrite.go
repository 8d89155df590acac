package jobs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/hamba/avro/v2/ocf"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/writers"
)

// A rewrite of compaction copies the rows of source files, whole or in row
// ranges, into one new file of the same format and schema:
//
//	parquet   arrow-go: each source read as Arrow batches, written as row
//	          groups of up to compactRowGroupRows rows with the loader's
//	          column encodings (dictionaries for text, delta for integers
//	          and times) and the spec's compression
//	avro      hamba/avro's OCF decoder → encoder, the source's schema and codec
//	jsonl     lines copied (decompressed and compressed again: gzip, zstd)
//
// Sources whose schemas differ are never written into one file (the
// planner keeps them apart; a sink refuses them).

// compactRowGroupRows is the row-group length of a compacted Parquet file
// (the loader's default).
const compactRowGroupRows = 128 * 1024

// rowRange is [lo, hi) of a file's rows.
type rowRange struct{ lo, hi int64 }

// sink writes one compacted file.
type sink interface {
	// add copies the rows of src in keep (nil: all) and returns how many.
	add(ctx context.Context, src io.ReaderAt, size int64, keep []rowRange) (int64, error)
	// close ends the file.
	close() error
}

// fileKind names a data file's format by its name's extension.
func fileKind(name string) (kind, ext string, ok bool) {
	for _, e := range []string{"parquet", "avro", "jsonl", "jsonl.gz", "jsonl.zst"} {
		if strings.HasSuffix(name, "."+e) {
			k := e
			if strings.HasPrefix(e, "jsonl") {
				k = "jsonl"
			}
			return k, e, true
		}
	}
	return "", "", false
}

// newSink starts a file of ext (a fileKind extension) on w; compression is
// the spec's output.compression (Parquet).
func newSink(ext string, w io.Writer, compression string) (sink, error) {
	switch ext {
	case "parquet":
		return &parquetSink{w: w, compression: compression, mem: memory.NewGoAllocator()}, nil
	case "avro":
		return &avroSink{w: w}, nil
	case "jsonl", "jsonl.gz", "jsonl.zst":
		return newJSONLSink(ext, w)
	}
	return nil, fmt.Errorf("%w: no rewrite for .%s files", writers.ErrCompaction, ext)
}

// inRanges calls emit for the parts of rows [at, at+n) inside keep (nil:
// the whole) as offsets relative to at.
func inRanges(keep []rowRange, at, n int64, emit func(lo, hi int64) error) error {
	if keep == nil {
		return emit(0, n)
	}
	for _, r := range keep {
		lo, hi := max(r.lo, at), min(r.hi, at+n)
		if lo < hi {
			if err := emit(lo-at, hi-at); err != nil {
				return err
			}
		}
	}
	return nil
}

type parquetSink struct {
	w           io.Writer
	compression string
	mem         memory.Allocator
	schema      *arrow.Schema
	fw          *pqarrow.FileWriter
}

func (s *parquetSink) props(schema *arrow.Schema) *parquet.WriterProperties {
	codec := compress.Codecs.Zstd
	switch s.compression {
	case "none", "uncompressed":
		codec = compress.Codecs.Uncompressed
	case "snappy":
		codec = compress.Codecs.Snappy
	case "gzip":
		codec = compress.Codecs.Gzip
	}
	p := []parquet.WriterProperty{
		parquet.WithCompression(codec),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(compactRowGroupRows),
		parquet.WithVersion(parquet.V2_6),
		parquet.WithCreatedBy("sluice"),
	}
	if codec == compress.Codecs.Zstd {
		p = append(p, parquet.WithCompressionLevel(1))
	}
	for _, f := range schema.Fields() {
		switch f.Type.ID() {
		case arrow.STRING, arrow.BINARY:
			p = append(p, parquet.WithDictionaryFor(f.Name, true))
		case arrow.INT32, arrow.INT64, arrow.TIMESTAMP, arrow.DATE32, arrow.TIME32, arrow.TIME64:
			p = append(p, parquet.WithEncodingFor(f.Name, parquet.Encodings.DeltaBinaryPacked))
		}
	}
	return parquet.NewWriterProperties(p...)
}

func (s *parquetSink) add(ctx context.Context, src io.ReaderAt, size int64, keep []rowRange) (int64, error) {
	pf, err := file.NewParquetReader(io.NewSectionReader(src, 0, size))
	if err != nil {
		return 0, fmt.Errorf("reading Parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, s.mem)
	if err != nil {
		return 0, fmt.Errorf("reading Parquet: %w", err)
	}
	schema, err := fr.Schema()
	if err != nil {
		return 0, fmt.Errorf("reading Parquet: %w", err)
	}
	if s.fw == nil {
		s.schema = schema
		if s.fw, err = pqarrow.NewFileWriter(schema, s.w, s.props(schema), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())); err != nil {
			return 0, fmt.Errorf("writing Parquet: %w", err)
		}
	} else if !schema.Equal(s.schema) {
		return 0, fmt.Errorf("%w: Parquet schemas differ: %s vs %s", writers.ErrCompaction, schema, s.schema)
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("reading Parquet: %w", err)
	}
	defer rr.Release()
	var at, rows int64
	for rr.Next() {
		rec := rr.RecordBatch()
		n := rec.NumRows()
		err := inRanges(keep, at, n, func(lo, hi int64) error {
			part := rec
			if lo != 0 || hi != n {
				part = rec.NewSlice(lo, hi)
				defer part.Release()
			}
			rows += hi - lo
			return s.fw.WriteBuffered(part)
		})
		if err != nil {
			return rows, fmt.Errorf("writing Parquet: %w", err)
		}
		at += n
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return rows, fmt.Errorf("reading Parquet: %w", err)
	}
	return rows, nil
}

func (s *parquetSink) close() error {
	if s.fw == nil {
		return fmt.Errorf("%w: no rows", writers.ErrCompaction)
	}
	return s.fw.Close()
}

type avroSink struct {
	w      io.Writer
	enc    *ocf.Encoder
	schema [32]byte
}

func (s *avroSink) add(ctx context.Context, src io.ReaderAt, size int64, keep []rowRange) (int64, error) {
	dec, err := ocf.NewDecoder(io.NewSectionReader(src, 0, size))
	if err != nil {
		return 0, fmt.Errorf("reading Avro: %w", err)
	}
	if s.enc == nil {
		codec := ocf.CodecName(dec.Metadata()["avro.codec"])
		if codec == "" {
			codec = ocf.Null
		}
		s.schema = dec.Schema().Fingerprint()
		if s.enc, err = ocf.NewEncoderWithSchema(dec.Schema(), s.w, ocf.WithCodec(codec),
			ocf.WithBlockLength(4096), ocf.WithBlockSize(1<<20)); err != nil {
			return 0, fmt.Errorf("writing Avro: %w", err)
		}
	} else if dec.Schema().Fingerprint() != s.schema {
		return 0, fmt.Errorf("%w: Avro schemas differ", writers.ErrCompaction)
	}
	var at, rows int64
	for dec.HasNext() {
		var v any
		if err := dec.Decode(&v); err != nil {
			return rows, fmt.Errorf("reading Avro: %w", err)
		}
		err := inRanges(keep, at, 1, func(lo, hi int64) error {
			rows++
			return s.enc.Encode(v)
		})
		if err != nil {
			return rows, fmt.Errorf("writing Avro: %w", err)
		}
		at++
	}
	if err := dec.Error(); err != nil && !errors.Is(err, io.EOF) {
		return rows, fmt.Errorf("reading Avro: %w", err)
	}
	return rows, ctx.Err()
}

func (s *avroSink) close() error {
	if s.enc == nil {
		return fmt.Errorf("%w: no rows", writers.ErrCompaction)
	}
	return s.enc.Close()
}

type jsonlSink struct {
	ext  string
	out  *bufio.Writer
	comp io.WriteCloser // nil: uncompressed
}

func newJSONLSink(ext string, w io.Writer) (*jsonlSink, error) {
	s := &jsonlSink{ext: ext}
	var dst io.Writer = w
	switch ext {
	case "jsonl.gz":
		s.comp = gzip.NewWriter(w)
	case "jsonl.zst":
		z, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		s.comp = z
	}
	if s.comp != nil {
		dst = s.comp
	}
	s.out = bufio.NewWriterSize(dst, 1<<20)
	return s, nil
}

func (s *jsonlSink) add(ctx context.Context, src io.ReaderAt, size int64, keep []rowRange) (int64, error) {
	var r io.Reader = io.NewSectionReader(src, 0, size)
	switch s.ext {
	case "jsonl.gz":
		g, err := gzip.NewReader(r)
		if err != nil {
			return 0, fmt.Errorf("reading JSON lines: %w", err)
		}
		defer g.Close()
		r = g
	case "jsonl.zst":
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return 0, fmt.Errorf("reading JSON lines: %w", err)
		}
		defer z.Close()
		r = z
	}
	br := bufio.NewReaderSize(r, 1<<20)
	var at, rows int64
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it.
			buf := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if len(line) > 0 {
			if !bytes.HasSuffix(line, []byte("\n")) {
				line = append(line, '\n')
			}
			werr := inRanges(keep, at, 1, func(lo, hi int64) error {
				rows++
				_, err := s.out.Write(line)
				return err
			})
			if werr != nil {
				return rows, werr
			}
			at++
		}
		if errors.Is(err, io.EOF) {
			return rows, ctx.Err()
		}
		if err != nil {
			return rows, fmt.Errorf("reading JSON lines: %w", err)
		}
	}
}

func (s *jsonlSink) close() error {
	if err := s.out.Flush(); err != nil {
		return err
	}
	if s.comp != nil {
		return s.comp.Close()
	}
	return nil
}

// parquetSchema returns the Arrow schema of a Parquet file as a string
// (its footer only is read).
func parquetSchema(r io.ReaderAt, size int64) (string, error) {
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, size))
	if err != nil {
		return "", fmt.Errorf("reading Parquet: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return "", fmt.Errorf("reading Parquet: %w", err)
	}
	s, err := fr.Schema()
	if err != nil {
		return "", fmt.Errorf("reading Parquet: %w", err)
	}
	return "parquet " + s.String(), nil
}
