package jobs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/sluicehq/sluice/internal/jschema"
	"github.com/sluicehq/sluice/internal/protoschema"
)

// Bounds on a typed value's framing and schema references.
const (
	maxMessageIndexes = 64  // nesting depth a Protobuf message index list may name
	maxRefDepth       = 16  // as the registry's
	maxRefSchemas     = 256 // referenced schemas, transitively
)

// typedRegistry fetches Protobuf and JSON schemas by id, with the schemas
// they reference (transitively, each after those it references), once per
// id. It is shared by the two typed decoders.
type typedRegistry struct {
	cl   *sr.Client
	want sr.SchemaType
	mu   sync.Mutex
	// compiled holds each id's compiled schema (guarded by mu): a
	// protoreflect.FileDescriptor or a *jschema.Columns with its validator;
	// refused, the bad-record error of an id the loader refuses.
	compiled map[int]any
	refused  map[int]error
}

// newTypedRegistry is a client of decode.registry with decode.registry_auth,
// as the Avro decoder's.
func newTypedRegistry(spec *Spec, want sr.SchemaType) (*typedRegistry, error) {
	url := spec.Decode.Registry
	opts, err := spec.registryClientOptions()
	if err != nil {
		return nil, err
	}
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(url)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: decode.registry %q: %v", ErrSpec, url, err)
	}
	return &typedRegistry{cl: cl, want: want, compiled: map[int]any{}, refused: map[int]error{}}, nil
}

// frame splits a Confluent-framed value: 0x00, a 4-byte big-endian id.
func frame(value []byte, what string) (int, []byte, error) {
	if len(value) < 5 || value[0] != 0 {
		return 0, nil, badRecord("not Confluent-framed %s (want 0x00 and a 4-byte schema id, got %d bytes%s)", what, len(value), magicNote(value))
	}
	return int(binary.BigEndian.Uint32(value[1:5])), value[5:], nil
}

// get returns id's compiled schema, compiling it with compile on first use.
func (r *typedRegistry) get(ctx context.Context, id int, compile func(text string, deps []jschema.Dep) (any, error)) (any, error) {
	r.mu.Lock()
	c, ok := r.compiled[id]
	refused := r.refused[id]
	r.mu.Unlock()
	if refused != nil {
		return nil, refused
	}
	if ok {
		return c, nil
	}
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		return nil, r.fetchError(err, fmt.Sprintf("schema id %d", id))
	}
	if s.Type != r.want {
		return nil, badRecord("schema id %d is %s, not %s", id, s.Type, r.want)
	}
	var deps []jschema.Dep
	if err := r.references(ctx, s.References, 1, map[string]string{}, map[sr.SchemaReference]string{}, &deps); err != nil {
		return nil, err
	}
	if c, err = compile(s.Schema, deps); err != nil {
		refused := badRecord("schema id %d: %s", id, shortError(err))
		r.mu.Lock()
		r.refused[id] = refused
		r.mu.Unlock()
		return nil, refused
	}
	r.mu.Lock()
	r.compiled[id] = c
	r.mu.Unlock()
	return c, nil
}

func (r *typedRegistry) fetchError(err error, what string) error {
	var re *sr.ResponseError
	if errors.As(err, &re) && re.StatusCode == 404 {
		return badRecord("%s is not in the registry", what)
	}
	return fmt.Errorf("%w: %s: %v", ErrRegistry, what, err)
}

// references appends the schemas refs name to deps, each after its own.
// seen maps each reference name to its text; fetched holds the referenced
// versions already expanded (subject and version), so that a version
// several references share is fetched once, not once per path to it
// (2^depth for a lattice).
func (r *typedRegistry) references(ctx context.Context, refs []sr.SchemaReference, depth int, seen map[string]string, fetched map[sr.SchemaReference]string, deps *[]jschema.Dep) error {
	if len(refs) > 0 && depth > maxRefDepth {
		return badRecord("schema references nest more than %d deep", maxRefDepth)
	}
	for _, ref := range refs {
		at := sr.SchemaReference{Subject: ref.Subject, Version: ref.Version}
		text, ok := fetched[at]
		if !ok {
			s, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
			if err != nil {
				return r.fetchError(err, fmt.Sprintf("reference %q (subject %s version %d)", ref.Name, ref.Subject, ref.Version))
			}
			if err := r.references(ctx, s.References, depth+1, seen, fetched, deps); err != nil {
				return err
			}
			text = s.Schema.Schema
			fetched[at] = text
		}
		if old, ok := seen[ref.Name]; ok {
			if old != text {
				return badRecord("reference name %q names two schemas", ref.Name)
			}
			continue
		}
		seen[ref.Name] = text
		if *deps = append(*deps, jschema.Dep{Name: ref.Name, Text: text}); len(*deps) > maxRefSchemas {
			return badRecord("more than %d schemas referenced", maxRefSchemas)
		}
	}
	return nil
}

// protobufDecoder decodes Confluent-framed Protobuf: 0x00, a 4-byte schema
// id, the message indexes (a zigzag varint count, then that many zigzag
// varints: the path from the file's top-level messages to the value's
// message; a count of 0 is [0], the first message), the message.
type protobufDecoder struct {
	reg *typedRegistry
	mu  sync.Mutex
	// messages holds each (id, indexes)'s message and row schema
	// (guarded by mu); ids the id of each row schema.
	messages map[string]*protoMessage
	ids      map[avro.Schema]int
}

type protoMessage struct {
	md     protoreflect.MessageDescriptor
	schema avro.Schema
	err    error // the bad-record refusal of the message
	// partial: no required field at any depth, so a decoded message needs
	// no check for missing ones (UnmarshalOptions.AllowPartial)
	partial bool
}

func newProtobufDecoder(spec *Spec) (*protobufDecoder, error) {
	reg, err := newTypedRegistry(spec, sr.TypeProtobuf)
	if err != nil {
		return nil, err
	}
	return &protobufDecoder{reg: reg, messages: map[string]*protoMessage{}, ids: map[avro.Schema]int{}}, nil
}

// messageIndexes reads the index list at the start of b.
func messageIndexes(b []byte) ([]int, []byte, error) {
	n, k := binary.Varint(b)
	if k <= 0 || n < 0 || n > maxMessageIndexes {
		return nil, nil, badRecord("protobuf: bad message index count (want 0 to %d)", maxMessageIndexes)
	}
	b = b[k:]
	if n == 0 {
		return []int{0}, b, nil
	}
	idx := make([]int, n)
	for i := range idx {
		v, k := binary.Varint(b)
		if k <= 0 || v < 0 || v > 1<<20 {
			return nil, nil, badRecord("protobuf: bad message index %d", i)
		}
		idx[i], b = int(v), b[k:]
	}
	return idx, b, nil
}

func (d *protobufDecoder) Decode(ctx context.Context, _, value []byte) (avro.Schema, map[string]any, error) {
	id, body, err := frame(value, "Protobuf")
	if err != nil {
		return nil, nil, err
	}
	idx, body, err := messageIndexes(body)
	if err != nil {
		return nil, nil, err
	}
	pm, err := d.message(ctx, id, idx)
	if err != nil {
		return nil, nil, err
	}
	msg := dynamicpb.NewMessage(pm.md)
	if err := (proto.UnmarshalOptions{RecursionLimit: 100, AllowPartial: pm.partial}).Unmarshal(body, msg); err != nil {
		return nil, nil, badRecord("protobuf: %v", err)
	}
	row, err := protoschema.Row(msg)
	if err != nil {
		return nil, nil, badRecord("protobuf: %v", err)
	}
	return pm.schema, row, nil
}

func (d *protobufDecoder) message(ctx context.Context, id int, idx []int) (*protoMessage, error) {
	var key strings.Builder
	key.WriteString(strconv.Itoa(id))
	for _, i := range idx {
		key.WriteByte(',')
		key.WriteString(strconv.Itoa(i))
	}
	d.mu.Lock()
	pm := d.messages[key.String()]
	d.mu.Unlock()
	if pm != nil {
		return pm, pm.err
	}
	c, err := d.reg.get(ctx, id, func(text string, deps []jschema.Dep) (any, error) {
		files := make(map[string]string, len(deps))
		for _, dp := range deps {
			files[dp.Name] = dp.Text
		}
		fd, err := protoschema.Parse(ctx, text, files)
		if err != nil {
			return nil, err
		}
		return fastDescriptor(fd), nil
	})
	if err != nil {
		return nil, err
	}
	// A path the schema has no message at is refused without being kept:
	// such paths come from the records, without bound; the paths that
	// name a message are as many as the schema's messages.
	var md protoreflect.MessageDescriptor
	msgs := c.(protoreflect.FileDescriptor).Messages()
	for depth, i := range idx {
		if i >= msgs.Len() {
			return nil, badRecord("protobuf: schema id %d has no message at index path %v (level %d)", id, idx, depth)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	pm = &protoMessage{md: md, partial: !hasRequired(md)}
	text, err := protoschema.AvroSchema(md)
	if err == nil {
		pm.schema, err = parseSchema(text)
	}
	if err != nil {
		pm.err = badRecord("protobuf: schema id %d message %s: %s", id, md.FullName(), shortError(err))
	}
	d.mu.Lock()
	d.messages[key.String()] = pm
	if pm.schema != nil {
		d.ids[pm.schema] = id
	}
	d.mu.Unlock()
	return pm, pm.err
}

func (d *protobufDecoder) writerSchemaID(s avro.Schema) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.ids[s]
	return id, ok
}

// jsonSchemaDecoder decodes Confluent-framed JSON Schema values: 0x00, a
// 4-byte schema id, a JSON document, which must be valid under the schema.
type jsonSchemaDecoder struct {
	reg *typedRegistry
	mu  sync.Mutex
	ids map[avro.Schema]int // guarded by mu
}

type jsonSchemaColumns struct {
	validator *jsonschema.Schema
	columns   *jschema.Columns
	schema    avro.Schema
}

func newJSONSchemaDecoder(spec *Spec) (*jsonSchemaDecoder, error) {
	reg, err := newTypedRegistry(spec, sr.TypeJSON)
	if err != nil {
		return nil, err
	}
	return &jsonSchemaDecoder{reg: reg, ids: map[avro.Schema]int{}}, nil
}

func (d *jsonSchemaDecoder) Decode(ctx context.Context, _, value []byte) (avro.Schema, map[string]any, error) {
	id, body, err := frame(value, "JSON Schema")
	if err != nil {
		return nil, nil, err
	}
	c, err := d.reg.get(ctx, id, func(text string, deps []jschema.Dep) (any, error) {
		v, err := jschema.Compile(text, deps)
		if err != nil {
			return nil, err
		}
		cols, err := jschema.Map(v)
		if err != nil {
			return nil, err
		}
		s, err := parseSchema(cols.Avro)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.ids[s] = id
		d.mu.Unlock()
		return &jsonSchemaColumns{validator: v, columns: cols, schema: s}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	js := c.(*jsonSchemaColumns)
	inst, err := jschema.Instance(body)
	if err != nil {
		return nil, nil, badRecord("json: %v", err)
	}
	if err := js.validator.Validate(inst); err != nil {
		return nil, nil, badRecord("json: not valid under schema id %d: %s", id, shortError(err))
	}
	row, err := js.columns.Row(inst)
	if err != nil {
		return nil, nil, badRecord("json: %v", err)
	}
	return js.schema, row, nil
}

func (d *jsonSchemaDecoder) writerSchemaID(s avro.Schema) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.ids[s]
	return id, ok
}
