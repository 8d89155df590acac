package jobs

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// ErrBadRecord is wrapped by every error a record's bytes cause (they do
// not decode, do not fit the schema, or fail the mapper). on_bad_record
// decides what happens to such a record.
var ErrBadRecord = errors.New("jobs: bad record")

// ErrRegistry reports a schema registry that could not be asked (not a
// bad record: the task fails and is retried).
var ErrRegistry = errors.New("jobs: schema registry")

// Decoder turns a record value into a row typed by an Avro schema. A
// Decoder is safe for concurrent use by the tasks of a run.
type Decoder interface {
	// Decode returns the value's schema (nil for schemaless JSON) and
	// fields. An error wrapping ErrBadRecord is the record's fault.
	Decode(ctx context.Context, key, value []byte) (avro.Schema, map[string]any, error)
}

func badRecord(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRecord, fmt.Sprintf(format, args...))
}

// parseSchema parses an Avro schema in a private cache, so two versions of
// a named type never meet (hamba's default cache is process-wide).
func parseSchema(text string) (avro.Schema, error) {
	return avro.ParseWithCache(text, "", &avro.SchemaCache{})
}

// maxSchemaFileBytes bounds decode.schema_file.
const maxSchemaFileBytes = 4 << 20

// readSchemaFile parses an .avsc file: a JSON document whose top level is an
// Avro record. Its errors name the field and the path and never carry the
// file's bytes (`schema_file: /etc/passwd` must not print the file): a JSON
// syntax error gives its line, an Avro error its first line, cut short.
func readSchemaFile(path string) (avro.Schema, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: decode.schema_file: %s: %s", ErrSpec, path, fmt.Sprintf(format, args...))
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, bad("cannot be read: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, bad("cannot be read: %v", err)
	}
	if !st.Mode().IsRegular() {
		return nil, bad("is not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSchemaFileBytes+1))
	if err != nil {
		return nil, bad("cannot be read: %v", err)
	}
	if len(b) > maxSchemaFileBytes {
		return nil, bad("is larger than %d bytes: not an Avro schema", maxSchemaFileBytes)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off := min(max(se.Offset, 0), int64(len(b)))
			return nil, bad("line %d: not JSON (an .avsc file is a JSON document)", 1+bytes.Count(b[:off], []byte("\n")))
		}
		return nil, bad("the top level is not a JSON object (want an Avro record schema)")
	}
	var typ string
	if json.Unmarshal(top["type"], &typ) != nil || typ != "record" {
		return nil, bad(`the top level is not an Avro record schema (want {"type": "record", "name": ..., "fields": [...]})`)
	}
	s, err := parseSchema(string(b))
	if err != nil {
		return nil, bad("not an Avro schema: %s", shortError(err))
	}
	return s, nil
}

// shortError is the first line of err, at most 160 bytes: an error of a
// parser may quote what it parsed.
func shortError(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > 160 {
		msg = strings.ToValidUTF8(msg[:160], "") + "…"
	}
	return msg
}

// avroSource is a Decoder of Avro binary: the columnar path takes the
// record's bytes and schema from Raw and decodes no map.
type avroSource interface {
	Decoder
	// Raw returns the value's writer schema and its Avro body. An error
	// wrapping ErrBadRecord is the record's fault.
	Raw(ctx context.Context, value []byte) (avro.Schema, []byte, error)
	// Identity returns the identity projection of schema (one per schema:
	// the writers compile per projection).
	Identity(schema avro.Schema) (*avrocodec.Projection, error)
}

// writerSchemas is a Decoder whose records each name their writer schema
// (a registry's): a schema refused in a record is that record's fault, a
// bad record, where a fixed schema (decode.schema_file) is checked at
// Open and its refusal is a spec error.
type writerSchemas interface {
	// writerSchemaID returns the registry id of a schema Raw returned.
	writerSchemaID(s avro.Schema) (int, bool)
}

// unboundedItems is the refusal of a schema with an array of items that
// take no bytes: one record of a few bytes could ask for unbounded work.
func unboundedItems(whose string, err error) string {
	return fmt.Sprintf("%s has an array of items that take no bytes (%v): refused (unbounded work)", whose, err)
}

// projections holds the identity projection of each schema a decoder met.
type projections struct {
	mu sync.Mutex
	by map[avro.Schema]*avrocodec.Projection
}

func (p *projections) Identity(schema avro.Schema) (*avrocodec.Projection, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr := p.by[schema]; pr != nil {
		return pr, nil
	}
	pr, err := avrocodec.NewProjection(schema, nil, nil)
	if err != nil {
		return nil, err // the caller says whose schema it is (see taskRun.schemaError)
	}
	if p.by == nil {
		p.by = map[avro.Schema]*avrocodec.Projection{}
	}
	p.by[schema] = pr
	return pr, nil
}

// avroFileDecoder decodes unframed Avro binary with one fixed schema.
type avroFileDecoder struct {
	schema avro.Schema
	projections
}

func (d *avroFileDecoder) Raw(_ context.Context, value []byte) (avro.Schema, []byte, error) {
	if value == nil {
		return nil, nil, badRecord("null value (a tombstone) has no Avro fields")
	}
	return d.schema, value, nil
}

func (d *avroFileDecoder) Decode(ctx context.Context, _, value []byte) (avro.Schema, map[string]any, error) {
	return decodeAvro(ctx, d, value)
}

// genericAvro is hamba/avro's generic decoder with a bound on what one
// count in a record may allocate (the scan before it bounds counts by the
// record's size; this is the second line).
var genericAvro = avro.Config{MaxSliceAllocSize: 1 << 24}.Freeze()

// decodeAvro decodes a value of src as a map. The bytes are scanned first:
// hamba's generic decoder takes some malformed records (a cut array, an
// over-long int) and makes nulls of them, where the scan refuses them.
func decodeAvro(ctx context.Context, src avroSource, value []byte) (avro.Schema, map[string]any, error) {
	schema, body, err := src.Raw(ctx, value)
	if err != nil {
		return nil, nil, err
	}
	p, err := src.Identity(schema)
	switch {
	case errors.Is(err, avrocodec.ErrUnboundedItems):
		// Refused before (a registry's at Raw, a schema file's at Open).
		return nil, nil, badRecord("%s", unboundedItems("the record's schema", err))
	case errors.Is(err, avrocodec.ErrUnsupportedSchema):
		// Not scannable (a record that contains itself): hamba alone.
	case err != nil:
		return nil, nil, badRecord("the record's schema: %v", err)
	default:
		if err := p.Scan(&avrocodec.Row{}, body); err != nil {
			return nil, nil, badRecord("%v", err)
		}
	}
	var v map[string]any
	if err := genericAvro.Unmarshal(schema, body, &v); err != nil {
		return nil, nil, badRecord("avro: %v", err)
	}
	return schema, v, nil
}

// registryDecoder decodes Confluent-framed Avro: 0x00, a 4-byte big-endian
// schema id, Avro binary. Schemas are fetched once per id.
type registryDecoder struct {
	projections
	cl *sr.Client
	mu sync.Mutex
	// cache holds parsed schemas by id (guarded by mu); a registry never
	// changes the schema of an id. refused holds the bad-record error of
	// each id whose schema the loader refuses; ids the id of each schema.
	cache   map[int]avro.Schema
	refused map[int]error
	ids     map[avro.Schema]int
	// evo checks the writer schemas' evolution (evolve.go).
	evo evolution
}

func newRegistryDecoder(spec *Spec) (*registryDecoder, error) {
	url := spec.Decode.Registry
	opts, err := spec.registryClientOptions()
	if err != nil {
		return nil, err
	}
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: decode.registry %q: %v", ErrSpec, url, err)
	}
	return &registryDecoder{cl: cl, cache: map[int]avro.Schema{}, refused: map[int]error{}, ids: map[avro.Schema]int{}}, nil
}

func (d *registryDecoder) Decode(ctx context.Context, _, value []byte) (avro.Schema, map[string]any, error) {
	return decodeAvro(ctx, d, value)
}

func (d *registryDecoder) Raw(ctx context.Context, value []byte) (avro.Schema, []byte, error) {
	if len(value) < 5 || value[0] != 0 {
		return nil, nil, badRecord("not Confluent-framed Avro (want 0x00 and a 4-byte schema id, got %d bytes%s)", len(value), magicNote(value))
	}
	id := int(binary.BigEndian.Uint32(value[1:5]))
	s, err := d.schema(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return s, value[5:], nil
}

func magicNote(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf(" starting 0x%02x", b[0])
}

func (d *registryDecoder) schema(ctx context.Context, id int) (avro.Schema, error) {
	d.mu.Lock()
	s, ok := d.cache[id]
	refused := d.refused[id]
	d.mu.Unlock()
	if refused != nil {
		return nil, refused
	}
	if ok {
		return s, nil
	}
	got, err := d.cl.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && re.StatusCode == 404 {
			return nil, badRecord("schema id %d is not in the registry", id)
		}
		return nil, fmt.Errorf("%w: schema id %d: %v", ErrRegistry, id, err)
	}
	if got.Type != sr.TypeAvro {
		return nil, badRecord("schema id %d is %s, not Avro", id, got.Type)
	}
	if s, err = parseSchema(got.Schema); err != nil {
		return nil, badRecord("schema id %d does not parse: %v", id, err)
	}
	if s.Type() != avro.Record {
		return nil, badRecord("schema id %d is a %s, not a record", id, s.Type())
	}
	if _, err := d.Identity(s); errors.Is(err, avrocodec.ErrUnboundedItems) {
		refused := badRecord("%s", unboundedItems(fmt.Sprintf("writer schema id %d", id), err))
		d.mu.Lock()
		d.refused[id] = refused
		d.mu.Unlock()
		return nil, refused
	}
	if err := d.admitRecordSchema(ctx, id, s); err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.cache[id] = s
	d.ids[s] = id
	d.mu.Unlock()
	return s, nil
}

func (d *registryDecoder) writerSchemaID(s avro.Schema) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.ids[s]
	return id, ok
}

// jsonDecoder decodes JSON objects; schema (declared or inferred) types
// them for the writers, nil leaves them schemaless (JSON-lines output).
type jsonDecoder struct{ schema avro.Schema }

func (d *jsonDecoder) Decode(_ context.Context, _, value []byte) (avro.Schema, map[string]any, error) {
	v, err := decodeJSONObject(value)
	if err != nil {
		return nil, nil, err
	}
	return d.schema, v, nil
}

func decodeJSONObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRecord("json: %v", err)
	}
	if dec.More() {
		return nil, badRecord("json: more than one value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRecord("json: the value is %T, not an object", v)
	}
	return numbers(m).(map[string]any), nil
}

// numbers turns json.Number into int64 when integral, float64 otherwise.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// kvDecoder keeps key and value as text or bytes.
type kvDecoder struct {
	schema avro.Schema
	text   bool
}

func newKVDecoder(text bool) *kvDecoder {
	t := "bytes"
	name := "BytesRecord"
	if text {
		t, name = "string", "StringRecord"
	}
	s := avro.MustParse(fmt.Sprintf(`{"type":"record","name":%q,"namespace":"sluice","fields":[
		{"name":"key","type":["null",%q]},{"name":"value","type":["null",%q]}]}`, name, t, t))
	return &kvDecoder{schema: s, text: text}
}

func (d *kvDecoder) Decode(_ context.Context, key, value []byte) (avro.Schema, map[string]any, error) {
	conv := func(b []byte) any {
		if b == nil {
			return nil
		}
		if d.text {
			return string(b)
		}
		return append([]byte(nil), b...)
	}
	return d.schema, map[string]any{"key": conv(key), "value": conv(value)}, nil
}
