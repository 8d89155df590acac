package schemaregistry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluicehq/sluice/internal/jschema"
)

// Compatibility levels (Confluent's names). BACKWARD is the default.
const (
	LevelNone               = "NONE"
	LevelBackward           = "BACKWARD"
	LevelBackwardTransitive = "BACKWARD_TRANSITIVE"
	LevelForward            = "FORWARD"
	LevelForwardTransitive  = "FORWARD_TRANSITIVE"
	LevelFull               = "FULL"
	LevelFullTransitive     = "FULL_TRANSITIVE"
	// DefaultLevel is the global level until PUT /config sets one.
	DefaultLevel = LevelBackward
)

// validLevel reports whether level is one of the seven levels above.
func validLevel(level string) bool {
	switch level {
	case LevelNone, LevelBackward, LevelBackwardTransitive, LevelForward,
		LevelForwardTransitive, LevelFull, LevelFullTransitive:
		return true
	}
	return false
}

// maxSchemaDepth bounds the JSON nesting of a schema, so a hostile schema
// cannot drive the Avro parser's recursion arbitrarily deep.
const maxSchemaDepth = 256

// parsedSchema is a registered or submitted schema of one of the three
// types, with its references resolved.
type parsedSchema struct {
	schemaType  string      // typeAvro, typeProtobuf or typeJSON
	avro        avro.Schema // AVRO
	proto       protoreflect.FileDescriptor
	json        *jsonschema.Schema
	references  []reference // as registered
	deps        []dep       // the referenced schemas, transitively, each after its own
	depth       int         // 0 without references, else 1 + the deepest reference's
	canonical   string      // the form stored, served and compared for equality
	key         string      // identity: canonical, with the type and references when not plain Avro
	fingerprint string      // hex SHA-256 of key
}

// parseAvro parses an Avro schema and returns it with its canonical text:
// the schema re-serialized by hamba/avro (whitespace, key order, namespace
// spelling and the form of primitive types normalized; defaults, docs,
// aliases and custom properties kept, because they change compatibility and
// what readers see). Two schemas with the same canonical text are the same
// schema and get the same id.
//
// Every failure is an *apiError with code 42201.
func parseAvro(text string) (ps parsedSchema, err error) {
	if strings.TrimSpace(text) == "" {
		return ps, errorf(codeInvalidSchema, "Invalid schema: the \"schema\" field is empty; send the Avro schema as a JSON string")
	}
	if d := jschema.Depth([]byte(text)); d > maxSchemaDepth {
		return ps, errorf(codeInvalidSchema, "Invalid schema: nested %d levels deep, more than the %d allowed", d, maxSchemaDepth)
	}
	defer func() {
		// hamba/avro is a third-party parser of untrusted text: a panic in
		// it is an invalid schema for the client, not a dead server.
		if r := recover(); r != nil {
			ps, err = parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: the Avro parser failed on it (%v)", r)
		}
	}()
	// A private cache: named types of one request never leak into another
	// (avro.Parse would share the package-wide DefaultSchemaCache).
	s, perr := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if perr != nil {
		return ps, errorf(codeInvalidSchema, "Invalid schema %s: %v", abbreviate(text, 200), perr)
	}
	canon, merr := json.Marshal(s)
	if merr != nil {
		return ps, errorf(codeInvalidSchema, "Invalid schema: cannot serialize it back: %v", merr)
	}
	sum := sha256.Sum256(canon)
	return parsedSchema{schemaType: typeAvro, avro: s, canonical: string(canon), key: string(canon), fingerprint: hex.EncodeToString(sum[:])}, nil
}

func abbreviate(s string, n int) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
