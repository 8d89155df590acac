package schemaregistry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"

	"github.com/sluicehq/sluice/internal/jschema"
	"github.com/sluicehq/sluice/internal/protoschema"
)

// Schema types (Confluent's schemaType values). An empty schemaType is AVRO.
const (
	typeAvro     = "AVRO"
	typeProtobuf = "PROTOBUF"
	typeJSON     = "JSON"
)

// Bounds on references: how deep a chain of references may go, and how
// many schemas one schema may reference, transitively.
const (
	maxReferenceDepth = 16
	maxReferences     = 256
)

// reference is one entry of a schema's "references": the schema registered
// as version Version of Subject, known to the referencing schema as Name
// (a Protobuf import path, a JSON Schema $ref URL, an Avro type's full name).
type reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// dep is a referenced schema, resolved: its reference name and its schema.
type dep struct {
	name   string
	schema parsedSchema
}

// submission is a schema as a request states it, before its references
// are resolved.
type submission struct {
	schemaType string
	text       string
	references []reference
}

// resolve finds the schemas refs name, and theirs: each referenced version
// must exist and be live (version -1 is the latest). Two references of one
// name must be one schema. References cannot form a cycle: each names a
// version registered before. pinned is refs with each -1 replaced by the
// version it resolved to: what is stored and served, so that an id keeps
// one meaning when the referenced subject moves on, and the version stays
// protected from deletion (referencedBy). Every failure is a 42201.
func (s *state) resolve(refs []reference) (pinned []reference, deps []dep, depth int, aerr *apiError) {
	if len(refs) == 0 {
		return nil, nil, 0, nil
	}
	if len(refs) > maxReferences {
		return nil, nil, 0, errorf(codeInvalidSchema, "Invalid schema: %d references, more than the %d allowed", len(refs), maxReferences)
	}
	pinned = make([]reference, 0, len(refs))
	byName := map[string]string{}
	add := func(d dep) *apiError {
		if k, ok := byName[d.name]; ok {
			if k != d.schema.key {
				return errorf(codeInvalidSchema, "Invalid schema: reference name %q names two different schemas (directly or through references)", abbreviate(d.name, 200))
			}
			return nil
		}
		byName[d.name] = d.schema.key
		deps = append(deps, d)
		if len(deps) > maxReferences {
			return errorf(codeInvalidSchema, "Invalid schema: more than %d schemas referenced, transitively", maxReferences)
		}
		return nil
	}
	for _, r := range refs {
		if r.Name == "" || r.Subject == "" {
			return nil, nil, 0, errorf(codeInvalidSchema, "Invalid schema: a reference needs a name and a subject, got %+v", r)
		}
		sub := s.subjects[r.Subject]
		var v *version
		if sub != nil {
			v = sub.find(r.Version, false)
			if r.Version == 0 {
				v = nil
			}
		}
		if v == nil {
			return nil, nil, 0, errorf(codeInvalidSchema, "Invalid schema: reference %q names version %d of subject '%s', which is not registered", abbreviate(r.Name, 200), r.Version, abbreviate(r.Subject, 200))
		}
		r.Version = v.number
		pinned = append(pinned, r)
		ref := s.schemas[v.id].schema
		if ref.depth+1 > maxReferenceDepth {
			return nil, nil, 0, errorf(codeInvalidSchema, "Invalid schema: references nest more than %d deep", maxReferenceDepth)
		}
		depth = max(depth, ref.depth+1)
		for _, d := range ref.deps {
			if aerr := add(d); aerr != nil {
				return nil, nil, 0, aerr
			}
		}
		if aerr := add(dep{name: r.Name, schema: ref}); aerr != nil {
			return nil, nil, 0, aerr
		}
	}
	return pinned, deps, depth, nil
}

// parseTyped parses a submission whose references resolved to deps. Every
// failure is an *apiError with code 42201.
func parseTyped(ctx context.Context, sub submission, deps []dep, depth int) (parsedSchema, error) {
	if strings.TrimSpace(sub.text) == "" {
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: the \"schema\" field is empty")
	}
	var (
		ps  parsedSchema
		err error
	)
	switch sub.schemaType {
	case typeAvro:
		if len(deps) == 0 {
			return parseAvro(sub.text)
		}
		ps, err = parseAvroWithDeps(sub.text, deps)
	case typeProtobuf:
		ps, err = parseProtobuf(ctx, sub.text, deps)
	case typeJSON:
		ps, err = parseJSONSchema(sub.text, deps)
	default:
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema type %q: want AVRO, PROTOBUF or JSON", abbreviate(sub.schemaType, 64))
	}
	if err != nil {
		return parsedSchema{}, err
	}
	ps.schemaType, ps.references, ps.deps, ps.depth = sub.schemaType, sub.references, deps, depth
	if len(sub.references) == 0 {
		ps.references = nil // [] and none are one
	}
	ps.key = sub.schemaType + "\x00" + refsKey(sub.references) + "\x00" + ps.key
	sum := sha256.Sum256([]byte(ps.key))
	ps.fingerprint = hex.EncodeToString(sum[:])
	return ps, nil
}

// parseAvroWithDeps parses an Avro schema whose named types may come from
// its references (parsed first, into the same private cache). Its
// canonical text is the text compacted: re-serialized, hamba/avro would
// inline the referenced types.
func parseAvroWithDeps(text string, deps []dep) (ps parsedSchema, err error) {
	if d := jschema.Depth([]byte(text)); d > maxSchemaDepth {
		return ps, errorf(codeInvalidSchema, "Invalid schema: nested %d levels deep, more than the %d allowed", d, maxSchemaDepth)
	}
	defer func() {
		if r := recover(); r != nil {
			ps, err = parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: the Avro parser failed on it (%v)", r)
		}
	}()
	cache := &avro.SchemaCache{}
	for _, d := range deps {
		if d.schema.schemaType != typeAvro {
			return ps, errorf(codeInvalidSchema, "Invalid schema: reference %q is a %s schema, not Avro", d.name, d.schema.schemaType)
		}
		if _, err := avro.ParseWithCache(d.schema.canonical, "", cache); err != nil {
			return ps, errorf(codeInvalidSchema, "Invalid schema: reference %q: %v", d.name, err)
		}
	}
	s, perr := avro.ParseWithCache(text, "", cache)
	if perr != nil {
		return ps, errorf(codeInvalidSchema, "Invalid schema %s: %v", abbreviate(text, 200), perr)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return ps, errorf(codeInvalidSchema, "Invalid schema: %v", err)
	}
	return parsedSchema{avro: s, canonical: b.String(), key: b.String()}, nil
}

// parseProtobuf compiles a Protobuf schema (.proto text or the base64 of a
// FileDescriptorProto) with protocompile. The text is served as
// registered; its identity is the compiled descriptor (comments, spacing
// and the form do not change it), so a schema registered again in another
// layout gets its id back.
func parseProtobuf(ctx context.Context, text string, deps []dep) (parsedSchema, error) {
	if d := jschema.Depth([]byte(text)); d > maxSchemaDepth {
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: nested %d levels deep, more than the %d allowed", d, maxSchemaDepth)
	}
	files := make(map[string]string, len(deps))
	for _, d := range deps {
		if d.schema.schemaType != typeProtobuf {
			return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: reference %q is a %s schema, not Protobuf", d.name, d.schema.schemaType)
		}
		files[d.name] = d.schema.canonical
	}
	fd, err := protoschema.Parse(ctx, text, files)
	if err != nil {
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: %s", strings.TrimPrefix(err.Error(), protoschema.ErrInvalid.Error()+": "))
	}
	if fd.Messages().Len() == 0 {
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: the Protobuf schema defines no message")
	}
	fdp := protodesc.ToFileDescriptorProto(fd)
	fdp.SourceCodeInfo, fdp.Name = nil, nil
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(fdp)
	if err != nil {
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: %v", err)
	}
	sum := sha256.Sum256(b)
	return parsedSchema{proto: fd, canonical: strings.TrimSpace(text), key: hex.EncodeToString(sum[:])}, nil
}

// parseJSONSchema compiles a JSON Schema; its canonical text is the text
// compacted.
func parseJSONSchema(text string, deps []dep) (parsedSchema, error) {
	canon, err := jschema.Canonical(text)
	if err != nil {
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: %v", err)
	}
	jd := make([]jschema.Dep, 0, len(deps))
	for _, d := range deps {
		if d.schema.schemaType != typeJSON {
			return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: reference %q is a %s schema, not JSON", d.name, d.schema.schemaType)
		}
		jd = append(jd, jschema.Dep{Name: d.name, Text: d.schema.canonical})
	}
	s, err := jschema.Compile(canon, jd)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, jschema.ErrInvalid) {
			msg = strings.Replace(msg, jschema.ErrInvalid.Error()+": ", "", 1)
		}
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: %s", msg)
	}
	return parsedSchema{json: s, canonical: canon, key: canon}, nil
}

// typeName is the schemaType a schema is served with: none for AVRO, as
// Confluent omits it.
func (ps parsedSchema) typeName() string {
	if ps.schemaType == typeAvro || ps.schemaType == "" {
		return ""
	}
	return ps.schemaType
}

func (ps parsedSchema) String() string {
	return fmt.Sprintf("%s schema %s", ps.schemaType, abbreviate(ps.canonical, 200))
}

// refsKey is the form of a reference list in identities: none and [] alike.
func refsKey(refs []reference) string {
	if len(refs) == 0 {
		return ""
	}
	b, _ := json.Marshal(refs)
	return string(b)
}

// referencedBy lists the registrations (soft-deleted ones too) whose
// schema references version of subject, sorted.
func (s *state) referencedBy(subject string, version int) []subjectVersion {
	var out []subjectVersion
	for _, v := range s.byNonce {
		e := s.schemas[v.id]
		if e == nil {
			continue
		}
		for _, r := range e.schema.references {
			if r.Subject == subject && r.Version == version {
				out = append(out, subjectVersion{Subject: v.subject, Version: v.number, ID: v.id})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b subjectVersion) int {
		if c := strings.Compare(a.Subject, b.Subject); c != 0 {
			return c
		}
		return a.Version - b.Version
	})
	return out
}

// lowestReferenced is the lowest version of sub (subject name) that a
// registration references, in one pass over the registrations (not one
// per version).
func (s *state) lowestReferenced(name string, sub *subject) (int, bool) {
	lowest, found := 0, false
	for _, v := range s.byNonce {
		e := s.schemas[v.id]
		if e == nil {
			continue
		}
		for _, r := range e.schema.references {
			if r.Subject == name && (!found || r.Version < lowest) && sub.find(r.Version, true) != nil {
				lowest, found = r.Version, true
			}
		}
	}
	return lowest, found
}
