package jschema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrValue is wrapped by the refusal of a value that does not fit its
// column (a date-time that does not parse, a fraction in an integer).
var ErrValue = errors.New("jschema: value does not fit")

// kind is what a column holds.
type kind int

const (
	kindRecord kind = iota
	kindMap
	kindArray
	kindLong
	kindDouble
	kindString
	kindBoolean
	kindTimestamp
	kindJSON // the value as JSON text
)

// Columns is the typed shape of a JSON Schema: the Avro schema of its
// rows and how to convert an instance into one.
type Columns struct {
	// Avro is the Avro schema (JSON) of the rows.
	Avro string
	root *column
}

type column struct {
	kind     kind
	nullable bool
	names    []string  // record: property names, in order
	fields   []*column // record: their columns
	elem     *column   // array items, map values
}

// Map maps a JSON Schema (compiled) to columns:
//
//	object with properties        record; every property nullable (it may be absent);
//	                              properties not in the schema are dropped
//	object with only a schema of  map of that schema's column
//	  additionalProperties
//	array with one items schema   array
//	integer / number              long / double
//	string                        string; format date-time: long timestamp-micros
//	boolean                       boolean
//	["T", "null"]                 T, nullable
//	several types, anyOf, oneOf,  string: the value as JSON text
//	  allOf, no type, a schema
//	  that contains itself
//
// The top level must be an object with properties.
func Map(s *jsonschema.Schema) (*Columns, error) {
	m := &mapper{open: map[*jsonschema.Schema]bool{}}
	root, avro := m.column(s)
	if root.kind != kindRecord {
		return nil, fmt.Errorf("%w: the top level is not an object with properties: cannot be a row", ErrInvalid)
	}
	b, err := json.Marshal(avro)
	if err != nil {
		return nil, err
	}
	return &Columns{Avro: string(b), root: root}, nil
}

type mapper struct {
	open    map[*jsonschema.Schema]bool
	records int
}

// Deref follows s's "$ref" chain (at most 64 links) to the schema it
// names: for the column mapping here and the registry's compatibility
// checks.
func Deref(s *jsonschema.Schema) *jsonschema.Schema {
	for i := 0; s != nil && s.Ref != nil && i < 64; i++ {
		s = s.Ref
	}
	return s
}

// column returns s's column and its Avro type (without the null branch).
func (m *mapper) column(s *jsonschema.Schema) (*column, any) {
	s = Deref(s)
	asJSON := &column{kind: kindJSON, nullable: true}
	if s == nil || m.open[s] || s.Bool != nil || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || len(s.AllOf) > 0 || s.Not != nil || s.If != nil {
		return asJSON, "string"
	}
	var types []string
	if s.Types != nil {
		types = s.Types.ToStrings()
	}
	nullable := slices.Contains(types, "null")
	types = slices.DeleteFunc(types, func(t string) bool { return t == "null" })
	if len(types) == 0 && s.Enum != nil {
		allStrings := true
		for _, v := range s.Enum.Values {
			if _, ok := v.(string); !ok {
				allStrings = false
			}
		}
		if allStrings {
			return &column{kind: kindString, nullable: true}, "string"
		}
	}
	if len(types) != 1 {
		return asJSON, "string"
	}
	c := &column{nullable: nullable}
	switch types[0] {
	case "integer":
		c.kind = kindLong
		return c, "long"
	case "number":
		c.kind = kindDouble
		return c, "double"
	case "boolean":
		c.kind = kindBoolean
		return c, "boolean"
	case "string":
		if s.Format != nil && s.Format.Name == "date-time" {
			c.kind = kindTimestamp
			return c, map[string]any{"type": "long", "logicalType": "timestamp-micros"}
		}
		c.kind = kindString
		return c, "string"
	case "array":
		it, ok := s.Items.(*jsonschema.Schema)
		if s.Items2020 != nil {
			it, ok = s.Items2020, true
		}
		if !ok || len(s.PrefixItems) > 0 {
			return asJSON, "string"
		}
		m.open[s] = true
		defer delete(m.open, s)
		e, t := m.column(it)
		c.kind, c.elem = kindArray, e
		return c, map[string]any{"type": "array", "items": orNull(e, t)}
	case "object":
		m.open[s] = true
		defer delete(m.open, s)
		if len(s.Properties) == 0 {
			if a, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
				e, t := m.column(a)
				c.kind, c.elem = kindMap, e
				return c, map[string]any{"type": "map", "values": orNull(e, t)}
			}
			return asJSON, "string"
		}
		c.kind = kindRecord
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		fields := make([]any, 0, len(names))
		for _, name := range names {
			if !validName(name) {
				return asJSON, "string"
			}
			e, t := m.column(s.Properties[name])
			e.nullable = true
			c.names, c.fields = append(c.names, name), append(c.fields, e)
			fields = append(fields, map[string]any{"name": name, "type": []any{"null", t}, "default": nil})
		}
		m.records++
		return c, map[string]any{"type": "record", "name": "Object" + strconv.Itoa(m.records), "namespace": "sluice.jsonschema", "fields": fields}
	}
	return asJSON, "string"
}

func orNull(c *column, t any) any {
	if c.nullable {
		return []any{"null", t}
	}
	return t
}

// validName reports whether a property name is an Avro field name.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Row converts an instance (as Instance parses it) into a row of c.Avro.
func (c *Columns) Row(v any) (map[string]any, error) {
	out, err := convert(c.root, v, "")
	if err != nil {
		return nil, err
	}
	row, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the value is not an object", ErrValue)
	}
	return row, nil
}

func convert(c *column, v any, path string) (any, error) {
	if v == nil {
		if c.kind == kindJSON {
			return nil, nil
		}
		if !c.nullable {
			return nil, fmt.Errorf("%w: %s is null", ErrValue, where(path))
		}
		return nil, nil
	}
	bad := func(want string) error {
		return fmt.Errorf("%w: %s is %s, not %s", ErrValue, where(path), jsonKind(v), want)
	}
	switch c.kind {
	case kindJSON:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrValue, where(path), err)
		}
		return string(b), nil
	case kindRecord:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad("an object")
		}
		out := make(map[string]any, len(c.names))
		for i, name := range c.names {
			x, err := convert(c.fields[i], m[name], path+"."+name)
			if err != nil {
				return nil, err
			}
			out[name] = x
		}
		return out, nil
	case kindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad("an object")
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			x, err := convert(c.elem, e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case kindArray:
		a, ok := v.([]any)
		if !ok {
			return nil, bad("an array")
		}
		out := make([]any, len(a))
		for i, e := range a {
			x, err := convert(c.elem, e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case kindLong:
		switch n := v.(type) {
		case json.Number:
			if i, err := n.Int64(); err == nil {
				return i, nil
			}
			f, err := n.Float64()
			if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<63 {
				return nil, bad("an integer that fits a long")
			}
			return int64(f), nil
		case int64:
			return n, nil
		case float64:
			if n != math.Trunc(n) || math.Abs(n) > 1<<63 {
				return nil, bad("an integer that fits a long")
			}
			return int64(n), nil
		}
		return nil, bad("an integer")
	case kindDouble:
		switch n := v.(type) {
		case json.Number:
			f, err := n.Float64()
			if err != nil {
				return nil, bad("a number that fits a double")
			}
			return f, nil
		case int64:
			return float64(n), nil
		case float64:
			return n, nil
		}
		return nil, bad("a number")
	case kindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, bad("a string")
	case kindBoolean:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, bad("a boolean")
	case kindTimestamp:
		s, ok := v.(string)
		if !ok {
			return nil, bad("a date-time string")
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %q is not an RFC 3339 date-time", ErrValue, where(path), s)
		}
		return t.UTC(), nil
	}
	return nil, fmt.Errorf("%w: %s: unknown column kind", ErrValue, where(path))
}

func where(path string) string {
	if path == "" {
		return "the value"
	}
	return "field " + path[1:]
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, int64, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
