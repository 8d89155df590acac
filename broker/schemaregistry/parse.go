package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// schemaRequest is the body of register, lookup and compatibility requests.
// Fields Confluent defines that this registry does not use (id, version,
// metadata, ruleSet) are accepted and ignored, as unknown fields are.
type schemaRequest struct {
	Schema     *string     `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []reference `json:"references"`
}

// parseSchemaRequest decodes and checks a schema request body. Every
// failure is a Confluent-style *apiError.
func parseSchemaRequest(body []byte) (submission, *apiError) {
	var req schemaRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		return submission{}, aerr
	}
	t := strings.ToUpper(req.SchemaType)
	switch t {
	case "":
		t = typeAvro
	case typeAvro, typeProtobuf, typeJSON:
	default:
		return submission{}, errorf(codeInvalidSchema, "Invalid schema type %q: want AVRO, PROTOBUF or JSON", abbreviate(req.SchemaType, 64))
	}
	if req.Schema == nil {
		return submission{}, errorf(codeInvalidSchema, "Invalid schema: the request has no \"schema\" field; send {\"schema\": \"<the schema as a JSON string>\"}")
	}
	if len(req.References) > maxReferences {
		return submission{}, errorf(codeInvalidSchema, "Invalid schema: %d references, more than the %d allowed", len(req.References), maxReferences)
	}
	return submission{schemaType: t, text: *req.Schema, references: req.References}, nil
}

// parseSubmission parses a request's schema with its references resolved
// against the registry's current state.
func (r *Registry) parseSubmission(req *request) (parsedSchema, *apiError) {
	sub, aerr := parseSchemaRequest(req.body)
	if aerr != nil {
		return parsedSchema{}, aerr
	}
	var (
		deps  []dep
		depth int
	)
	if len(sub.references) > 0 {
		r.store.view(func(st *state) { sub.references, deps, depth, aerr = st.resolve(sub.references) })
		if aerr != nil {
			return parsedSchema{}, aerr
		}
	}
	ps, err := parseTyped(req.ctx, sub, deps, depth)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return parsedSchema{}, ae
		}
		return parsedSchema{}, errorf(codeInvalidSchema, "Invalid schema: %v", err)
	}
	return ps, nil
}

// configRequest is the body of PUT /config.
type configRequest struct {
	Compatibility      string `json:"compatibility"`
	CompatibilityLevel string `json:"compatibilityLevel"`
}

// parseConfigRequest decodes a PUT /config body and returns its level.
func parseConfigRequest(body []byte) (string, *apiError) {
	var req configRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		return "", aerr
	}
	level := req.Compatibility
	if level == "" {
		level = req.CompatibilityLevel
	}
	level = strings.ToUpper(level)
	if !validLevel(level) {
		return "", errorf(codeInvalidCompatibilityLevel, "Invalid compatibility level %q. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive", abbreviate(level, 64))
	}
	return level, nil
}

// decodeJSON decodes one JSON object: malformed JSON is a 400, a value of
// the wrong type a 422, as Confluent's REST layer answers.
func decodeJSON(body []byte, into any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorf(codeBadRequest, "The request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(into); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return errorf(codeUnprocessable, "Unrecognized field type: %q must be a JSON %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		}
		return errorf(codeBadRequest, "Malformed JSON in the request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(codeBadRequest, "Malformed JSON in the request body: data after the JSON object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "ptr", "string":
		return "string"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	}
	return goKind
}

// parseVersion parses a version path segment: "latest" (or -1) is -1, else
// an integer in [1, 2^31-1]; anything else is a 42202.
func parseVersion(s string) (int, *apiError) {
	if s == "latest" || s == "-1" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, invalidVersion(abbreviate(s, 64))
	}
	return int(n), nil
}

// parseID parses a schema id path segment; anything but a positive 32-bit
// integer is an unknown schema.
func parseID(s string) (int, *apiError) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, errorf(codeSchemaNotFound, "Schema %s not found", strconv.Quote(abbreviate(s, 64)))
	}
	return int(n), nil
}

// maxSubjectBytes bounds a subject name.
const maxSubjectBytes = 1024

// checkSubject refuses subject names that are empty, too long, not UTF-8 or
// hold control characters (42208).
func checkSubject(s string) *apiError {
	switch {
	case s == "":
		return errorf(codeInvalidSubject, "Invalid subject: the name is empty")
	case len(s) > maxSubjectBytes:
		return errorf(codeInvalidSubject, "Invalid subject: the name is %d bytes, more than %d", len(s), maxSubjectBytes)
	case !utf8.ValidString(s):
		return errorf(codeInvalidSubject, "Invalid subject: the name is not UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errorf(codeInvalidSubject, "Invalid subject %q: the name holds control characters", s)
	}
	return nil
}

// queryBool reads a boolean query parameter the way Jersey does: "true" in
// any case is true, anything else false.
func queryBool(v string) bool { return strings.EqualFold(v, "true") }

// acceptedMediaTypes are the request content types taken as JSON.
var acceptedMediaTypes = map[string]bool{
	"application/vnd.schemaregistry.v1+json": true,
	"application/vnd.schemaregistry+json":    true,
	"application/json":                       true,
	"application/octet-stream":               true,
}

// checkContentType accepts a missing Content-Type and the JSON types above.
func checkContentType(header string) *apiError {
	if header == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil || !acceptedMediaTypes[strings.ToLower(mt)] {
		return errorf(codeUnsupportedMediaType, "Unsupported Content-Type %q: send application/vnd.schemaregistry.v1+json or application/json", abbreviate(header, 100))
	}
	return nil
}
