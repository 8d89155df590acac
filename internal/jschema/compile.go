// Package jschema compiles the JSON Schemas of a Confluent schema registry
// (schemaType JSON) with santhosh-tekuri/jsonschema/v6, for the registry
// (parse, normalize, compatibility) and the loader (validate a record, map
// the schema to columns). A schema's references are other registered
// schemas, each under its reference name: a "$ref" to that name (relative
// to the schema, or as an absolute URL) resolves to it. Nothing is read
// from disk or the network: any other "$ref" outside the schema fails.
package jschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrInvalid is wrapped by every error of a schema that does not compile
// or is over a bound.
var ErrInvalid = errors.New("jschema: invalid schema")

// Bounds on one schema and its references.
const (
	MaxSchemaBytes = 512 << 10
	MaxFiles       = 256
	maxDepth       = 256
)

// base is the URL a schema is compiled under; a reference name that is not
// an absolute URL resolves against it.
const base = "urn:sluice:schema/"

// Dep is one referenced schema: its reference name and text.
type Dep struct{ Name, Text string }

// Compile compiles text with the referenced schemas deps.
func Compile(text string, deps []Dep) (*jsonschema.Schema, error) {
	if len(text) > MaxSchemaBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalid, len(text), MaxSchemaBytes)
	}
	if len(deps) > MaxFiles {
		return nil, fmt.Errorf("%w: %d referenced schemas, more than %d", ErrInvalid, len(deps), MaxFiles)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file, no network
	c.DefaultDraft(jsonschema.Draft7)
	add := func(loc, t string) error {
		if d := Depth([]byte(t)); d > maxDepth {
			return fmt.Errorf("%w: nested %d levels deep, more than %d", ErrInvalid, d, maxDepth)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(t))
		if err != nil {
			return fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
		}
		if err := c.AddResource(loc, doc); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		return nil
	}
	for _, d := range deps {
		if err := add(location(d.Name), d.Text); err != nil {
			return nil, fmt.Errorf("reference %q: %w", d.Name, err)
		}
	}
	main := base + "main.json"
	if err := add(main, text); err != nil {
		return nil, err
	}
	s, err := compile(c, main)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, firstLine(err))
	}
	return s, nil
}

func compile(c *jsonschema.Compiler, loc string) (s *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("the JSON Schema compiler failed on it (%v)", r)
		}
	}()
	return c.Compile(loc)
}

// location is the URL a reference name is added under.
func location(name string) string {
	if u, err := url.Parse(name); err == nil && u.IsAbs() {
		return name
	}
	return base + strings.TrimPrefix(name, "/")
}

// Canonical is text compacted (insignificant whitespace removed, key order
// kept): Confluent's normal form of a JSON schema.
func Canonical(text string) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		return "", fmt.Errorf("%w: not JSON: %v", ErrInvalid, err)
	}
	return b.String(), nil
}

// Instance parses a JSON value the way the validator wants it (numbers as
// json.Number).
func Instance(b []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

// Depth is the deepest nesting of objects and arrays in data, counted
// without parsing it (strings are skipped, malformed input just counts):
// the bound checked before a recursive parser (this package's compiler,
// the registry's Avro and Protobuf parsers) is given the text.
func Depth(data []byte) int {
	d, deepest, inString, escaped := 0, 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}
