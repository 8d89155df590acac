package format

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

type jsonWriter struct {
	cw      *countingWriter
	comp    io.WriteCloser // nil when uncompressed
	bw      *bufio.Writer
	counter *countingWriter // uncompressed bytes
	enc     *json.Encoder
	fields  []string
	fns     []avrocodec.JSONFn // nil entries need no conversion
	meta    bool
	rowCol  bool // the _row column (Options.RowColumn)
	micros  bool
	records int64
	// estimate of the compressed size of what is still buffered
	rawAtOut int64
	outAt    int64
}

func newJSONWriter(w io.Writer, schema avro.Schema, opts Options) (*jsonWriter, error) {
	j := &jsonWriter{cw: &countingWriter{w: w}, meta: opts.MetadataColumns, rowCol: opts.rowColumn(), micros: opts.TimestampMicros}
	var sink io.Writer = j.cw
	switch opts.Compression {
	case "gzip":
		j.comp = gzip.NewWriter(j.cw)
	case "zstd":
		z, err := zstd.NewWriter(j.cw, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("format: jsonl zstd: %w", err)
		}
		j.comp = z
	}
	if j.comp != nil {
		sink = j.comp
	}
	j.counter = &countingWriter{w: sink}
	j.bw = bufio.NewWriterSize(j.counter, 64<<10)
	j.enc = json.NewEncoder(j.bw)
	j.enc.SetEscapeHTML(false)
	if schema != nil {
		rec, ok := avrocodec.Deref(schema).(*avro.RecordSchema)
		if !ok {
			return nil, fmt.Errorf("%w: top level is %s, want a record", avrocodec.ErrUnsupportedSchema, schema.Type())
		}
		if name, ok := avrocodec.SelfContaining(rec); ok {
			return nil, fmt.Errorf("%w: record %s contains itself: JSON lines take finite schemas (use avro output)", avrocodec.ErrUnsupportedSchema, name)
		}
		for _, f := range rec.Fields() {
			fn, err := jsonConverter(f.Type(), f.Name())
			if err != nil {
				return nil, err
			}
			if fn != nil {
				j.fields = append(j.fields, f.Name())
				j.fns = append(j.fns, fn)
			}
		}
	}
	return j, nil
}

// jsonConverter returns nil when values of s marshal correctly as they are.
func jsonConverter(s avro.Schema, path string) (avrocodec.JSONFn, error) {
	s = avrocodec.Deref(s)
	var branch avro.Schema // nil: no wrapper to remove
	if u, ok := s.(*avro.UnionSchema); ok {
		b, _, err := avrocodec.NonNull(u, path)
		if err != nil {
			// JSON can hold any union: leave values as they are.
			return unwrapAny, nil //nolint:nilerr
		}
		s = avrocodec.Deref(b)
		if s.Type() != avro.Map {
			branch = s
		}
	}
	inner, err := jsonValueConverter(s, path)
	if err != nil {
		return nil, err
	}
	if branch == nil {
		return inner, nil
	}
	return func(v any) (any, error) {
		v = avrocodec.UnwrapUnion(v, branch)
		if v == nil || inner == nil {
			return v, nil
		}
		return inner(v)
	}, nil
}

func unwrapAny(v any) (any, error) {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, x := range m {
			return x, nil
		}
	}
	return v, nil
}

func jsonValueConverter(s avro.Schema, path string) (avrocodec.JSONFn, error) {
	if sc, ok := avrocodec.ScalarOf(s); ok {
		if sc.JSON == nil {
			return nil, nil
		}
		return sc.JSON(s, path), nil
	}
	switch s.Type() {
	case avro.Record:
		rec := s.(*avro.RecordSchema)
		var names []string
		var fns []avrocodec.JSONFn
		for _, f := range rec.Fields() {
			fn, err := jsonConverter(f.Type(), path+"."+f.Name())
			if err != nil {
				return nil, err
			}
			if fn != nil {
				names, fns = append(names, f.Name()), append(fns, fn)
			}
		}
		if len(fns) == 0 {
			return nil, nil
		}
		return func(v any) (any, error) {
			m, ok := v.(map[string]any)
			if !ok {
				return v, nil
			}
			out := make(map[string]any, len(m))
			for k, x := range m {
				out[k] = x
			}
			for i, fn := range fns {
				x, err := fn(m[names[i]])
				if err != nil {
					return nil, err
				}
				out[names[i]] = x
			}
			return out, nil
		}, nil
	case avro.Array:
		fn, err := jsonConverter(s.(*avro.ArraySchema).Items(), path+"[]")
		if err != nil || fn == nil {
			return nil, err
		}
		return func(v any) (any, error) {
			xs, ok := v.([]any)
			if !ok {
				return v, nil
			}
			out := make([]any, len(xs))
			for i, x := range xs {
				y, err := fn(x)
				if err != nil {
					return nil, err
				}
				out[i] = y
			}
			return out, nil
		}, nil
	case avro.Map:
		fn, err := jsonConverter(s.(*avro.MapSchema).Values(), path+"{}")
		if err != nil || fn == nil {
			return nil, err
		}
		return func(v any) (any, error) {
			m, ok := v.(map[string]any)
			if !ok {
				return v, nil
			}
			out := make(map[string]any, len(m))
			for k, x := range m {
				y, err := fn(x)
				if err != nil {
					return nil, err
				}
				out[k] = y
			}
			return out, nil
		}, nil
	}
	return nil, nil
}

func (j *jsonWriter) Write(value map[string]any, meta Meta) error {
	for i, fn := range j.fns {
		x, err := fn(value[j.fields[i]])
		if err != nil {
			return err
		}
		if x != nil {
			value[j.fields[i]] = x
		}
	}
	if j.meta {
		value[ColTopic] = meta.Topic
		value[ColPartition] = meta.Partition
		value[ColOffset] = meta.Offset
		layout := "2006-01-02T15:04:05.000Z07:00"
		if j.micros {
			layout = "2006-01-02T15:04:05.000000Z07:00"
		}
		value[ColTimestamp] = meta.Timestamp.UTC().Format(layout)
		if j.rowCol {
			value[ColRow] = meta.Row
		}
	}
	before := j.cw.n
	if err := j.enc.Encode(value); err != nil {
		var ue *json.UnsupportedValueError
		var te *json.UnsupportedTypeError
		if errors.As(err, &ue) || errors.As(err, &te) {
			return fmt.Errorf("%w: %v", avrocodec.ErrBadValue, err)
		}
		return fmt.Errorf("format: jsonl: %w", err)
	}
	if j.cw.n != before {
		j.rawAtOut, j.outAt = j.counter.n, j.cw.n
	}
	j.records++
	return nil
}

func (j *jsonWriter) Records() int64 { return j.records }

func (j *jsonWriter) Bytes() int64 {
	raw := j.counter.n + int64(j.bw.Buffered())
	if j.comp == nil {
		return raw
	}
	ratio := 0.2
	if j.rawAtOut > 0 {
		ratio = float64(j.outAt) / float64(j.rawAtOut)
	}
	return j.cw.n + int64(float64(raw-j.rawAtOut)*ratio)
}

func (j *jsonWriter) Close() error {
	err := j.bw.Flush()
	if j.comp != nil {
		err = errors.Join(err, j.comp.Close())
	}
	return err
}
