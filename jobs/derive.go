package jobs

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm"
	"github.com/hamba/avro/v2"
	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// DerivedColumn is one column of map.derive: a name, an expr-lang
// expression over the row's fields, and the column's type (an Avro type
// name; empty: the type of the expression's result).
type DerivedColumn struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
	Type string `json:"type,omitempty"`
}

// Derive is map.derive: columns computed from each row, added after its
// fields in the order written. In YAML, a mapping of name to an
// expression, or to {expr: ..., type: long}.
type Derive []DerivedColumn

// UnmarshalYAML reads the mapping in its order.
func (d *Derive) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: map.derive: want a mapping of column names to expressions", n.Line)
	}
	*d = nil
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		c := DerivedColumn{Name: k.Value}
		switch v.Kind {
		case yaml.ScalarNode:
			c.Expr = v.Value
		case yaml.MappingNode:
			for j := 0; j+1 < len(v.Content); j += 2 {
				kk, vv := v.Content[j], v.Content[j+1]
				if vv.Kind != yaml.ScalarNode {
					return fmt.Errorf("line %d: map.derive.%s.%s: want a single value", kk.Line, c.Name, kk.Value)
				}
				switch kk.Value {
				case "expr":
					c.Expr = vv.Value
				case "type":
					c.Type = vv.Value
				default:
					return fmt.Errorf("line %d: map.derive.%s.%s: unknown key (known here: expr, type)", kk.Line, c.Name, kk.Value)
				}
			}
		default:
			return fmt.Errorf("line %d: map.derive.%s: want an expression or {expr: ..., type: ...}", v.Line, c.Name)
		}
		*d = append(*d, c)
	}
	return nil
}

// deriveTypes are the types a derived column may declare: the Avro type
// of the column (nullable: a nil result is null) and the conversion of a
// result to the Go value both paths write.
var deriveTypes = map[string]struct {
	avro    string
	convert func(any) (any, error)
}{
	"string": {`"string"`, toString},
	"long": {`"long"`, func(v any) (any, error) {
		return toWhole(v, math.MinInt64, math.MaxInt64, func(n int64) any { return n })
	}},
	"int": {`"int"`, func(v any) (any, error) {
		return toWhole(v, math.MinInt32, math.MaxInt32, func(n int64) any { return int(n) })
	}},
	"double":           {`"double"`, func(v any) (any, error) { return toFloat(v, func(f float64) any { return f }) }},
	"float":            {`"float"`, func(v any) (any, error) { return toFloat(v, func(f float64) any { return float32(f) }) }},
	"boolean":          {`"boolean"`, toBool},
	"timestamp-millis": {`{"type":"long","logicalType":"timestamp-millis"}`, toTimestamp},
	"timestamp-micros": {`{"type":"long","logicalType":"timestamp-micros"}`, toTimestamp},
	"date":             {`{"type":"int","logicalType":"date"}`, toTimestamp},
}

func deriveTypeNames() string {
	return "string, long, int, double, float, boolean, timestamp-millis, timestamp-micros, date"
}

func toString(v any) (any, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	return nil, fmt.Errorf("%s is not a string", valueKind(v))
}

func toWhole(v any, lo, hi int64, as func(int64) any) (any, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case float64:
		if x != math.Trunc(x) || x < float64(lo) || x >= -float64(lo) {
			return nil, fmt.Errorf("%v is not a whole number in range", x)
		}
		n = int64(x)
	case float32:
		return toWhole(float64(x), lo, hi, as)
	default:
		return nil, fmt.Errorf("%s is not a number", valueKind(v))
	}
	if n < lo || n > hi {
		return nil, fmt.Errorf("%d is out of range", n)
	}
	return as(n), nil
}

func toFloat(v any, as func(float64) any) (any, error) {
	switch x := v.(type) {
	case float64:
		return as(x), nil
	case float32:
		return as(float64(x)), nil
	case int:
		return as(float64(x)), nil
	case int32:
		return as(float64(x)), nil
	case int64:
		return as(float64(x)), nil
	}
	return nil, fmt.Errorf("%s is not a number", valueKind(v))
}

func toBool(v any) (any, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	return nil, fmt.Errorf("%s is not a boolean", valueKind(v))
}

func toTimestamp(v any) (any, error) {
	if t, ok := v.(time.Time); ok {
		return t.UTC(), nil
	}
	return nil, fmt.Errorf("%s is not a time", valueKind(v))
}

// deriveOptions are the expression options of map.derive: expr-lang's,
// with date also taking a time (date(ts): the day of ts, in UTC), which
// expr-lang's date (text only) does not.
func deriveOptions() []expr.Option {
	return []expr.Option{
		expr.DisableBuiltin("date"),
		expr.Function("date", deriveDate,
			new(func(time.Time) time.Time),
			new(func(string) time.Time),
			new(func(string, string) time.Time),
			new(func(string, string, string) time.Time),
			new(func(*time.Location, string) time.Time),
			new(func(*time.Location, string, string) time.Time)),
	}
}

// textDate is expr-lang's date.
var textDate = func() func(...any) (any, error) {
	for _, f := range builtin.Builtins {
		if f.Name == "date" {
			return f.Func
		}
	}
	panic("jobs: expr-lang has no date function")
}()

func deriveDate(args ...any) (any, error) {
	if len(args) == 1 {
		if t, ok := args[0].(time.Time); ok {
			t = t.UTC()
			return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
		}
	}
	return textDate(args...)
}

// derivedCol is a compiled map.derive column.
type derivedCol struct {
	DerivedColumn
	prog  *vm.Program
	names []string // the identifiers it names: the fields the columnar path decodes for it
}

// compileDerive compiles the columns of d, refusing an empty name or
// expression, a name given twice, an unknown type and an expression that
// does not compile.
func compileDerive(d Derive) ([]*derivedCol, error) {
	var out []*derivedCol
	seen := map[string]bool{}
	for _, c := range d {
		field := "map.derive." + c.Name
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%w: map.derive: a column has no name", ErrSpec)
		case !avroName(c.Name):
			return nil, fmt.Errorf("%w: %s: %q is not a column name (letters, digits and _, not starting with a digit)", ErrSpec, field, c.Name)
		case seen[c.Name]:
			return nil, fmt.Errorf("%w: %s: named twice", ErrSpec, field)
		case c.Expr == "":
			return nil, fmt.Errorf("%w: %s: no expression", ErrSpec, field)
		}
		seen[c.Name] = true
		if _, ok := deriveTypes[c.Type]; c.Type != "" && !ok {
			return nil, fmt.Errorf("%w: %s.type: %q is not one of %s", ErrSpec, field, c.Type, deriveTypeNames())
		}
		p, err := expr.Compile(c.Expr, append(deriveOptions(), expr.AllowUndefinedVariables())...)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %q: %s", ErrSpec, field, c.Expr, firstLine(err.Error()))
		}
		dc := &derivedCol{DerivedColumn: c, prog: p}
		node := p.Node()
		ast.Walk(&node, identifiers{seen: map[string]bool{}, names: &dc.names})
		out = append(out, dc)
	}
	return out, nil
}

// avroName reports whether s is an Avro field name.
func avroName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

func firstLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			return s[:i]
		}
	}
	return s
}

// typeOf returns the type name of c's column for rows of schema rows: the
// declared one, else the type of the expression's result over fields of
// rows' types (a result of no one type, say a nullable field's, must be
// declared).
func (c *derivedCol) typeOf(rows *avro.RecordSchema) (string, error) {
	env := map[string]any{}
	for _, f := range rows.Fields() {
		if v, ok := zeroOf(f.Type()); ok {
			env[f.Name()] = v
		}
	}
	p, err := expr.Compile(c.Expr, append(deriveOptions(), expr.Env(env), expr.AllowUndefinedVariables())...)
	if err != nil {
		return "", fmt.Errorf("%w: map.derive.%s: %q over the fields of %s: %s", ErrSpec, c.Name, c.Expr, rows.FullName(), firstLine(err.Error()))
	}
	if c.Type != "" {
		return c.Type, nil
	}
	if call, ok := p.Node().(*ast.CallNode); ok {
		if id, ok := call.Callee.(*ast.IdentifierNode); ok && id.Value == "date" {
			return "date", nil // a day: date(ts), date("2024-05-01")
		}
	}
	if t := p.Node().Type(); t != nil {
		switch t.Kind() {
		case reflect.String:
			return "string", nil
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16, reflect.Uint32:
			return "long", nil
		case reflect.Float32, reflect.Float64:
			return "double", nil
		case reflect.Bool:
			return "boolean", nil
		}
		if t == reflect.TypeOf(time.Time{}) {
			return "timestamp-micros", nil
		}
	}
	return "", fmt.Errorf("%w: map.derive.%s: the type of %q cannot be told from the fields of %s: declare it ({expr: ..., type: long}; one of %s)",
		ErrSpec, c.Name, c.Expr, rows.FullName(), deriveTypeNames())
}

// zeroOf is a value of the Go type the map path decodes a field of type s
// into, for typing expressions; false for types of no one Go type (unions).
func zeroOf(s avro.Schema) (any, bool) {
	if ls := avrocodec.Logical(s); ls != nil {
		switch ls.Type() {
		case avro.TimestampMillis, avro.TimestampMicros, avro.Date, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
			return time.Time{}, true
		}
		return nil, false
	}
	switch s.Type() {
	case avro.String, avro.Enum:
		return "", true
	case avro.Int:
		return int(0), true
	case avro.Long:
		return int64(0), true
	case avro.Float:
		return float32(0), true
	case avro.Double:
		return float64(0), true
	case avro.Boolean:
		return false, true
	case avro.Bytes:
		return []byte{}, true
	case avro.Array:
		return []any{}, true
	case avro.Map, avro.Record:
		return map[string]any{}, true
	case avro.Ref:
		return zeroOf(s.(*avro.RefSchema).Schema())
	}
	return nil, false
}

// eval computes c over env, converted to the column's type t; nil is null.
func (c *derivedCol) eval(env map[string]any, t string) (any, error) {
	v, err := expr.Run(c.prog, env)
	if err != nil {
		return nil, fmt.Errorf("%w: map.derive.%s %q: %v", ErrBadRecord, c.Name, c.Expr, err)
	}
	if v == nil {
		return nil, nil
	}
	out, err := deriveTypes[t].convert(v)
	if err != nil {
		return nil, fmt.Errorf("%w: map.derive.%s %q: the result %v: %v (the column is %s)", ErrBadRecord, c.Name, c.Expr, v, err, t)
	}
	return out, nil
}

// deriving is a mapper with map.derive's columns added to every row it
// emits.
type deriving struct {
	inner Mapper
	cols  []*derivedCol
	// types are the columns' types for records of each input schema (none
	// for schemaless rows: declared types, else the result as it is).
	types map[avro.Schema][]string
}

// withDerive returns m with the columns of d, or m when d has none.
func withDerive(m Mapper, cols []*derivedCol) Mapper {
	if len(cols) == 0 {
		return m
	}
	return &deriving{inner: m, cols: cols}
}

// baseMapper returns the mapper under map.derive's columns.
func baseMapper(m Mapper) Mapper {
	if d, ok := m.(*deriving); ok {
		return d.inner
	}
	return m
}

// extend returns rows plus the derived columns, and their types.
func (d *deriving) extend(rows avro.Schema) (avro.Schema, []string, error) {
	rec, ok := rows.(*avro.RecordSchema)
	if !ok {
		return nil, nil, fmt.Errorf("%w: map.derive needs record rows, not %s", ErrSpec, rows.Type())
	}
	have := map[string]bool{}
	for _, f := range rec.Fields() {
		have[f.Name()] = true
	}
	types := make([]string, len(d.cols))
	add := make([][2]string, len(d.cols))
	for i, c := range d.cols {
		if have[c.Name] {
			return nil, nil, fmt.Errorf("%w: map.derive.%s: the rows of %s have a field %s already", ErrSpec, c.Name, rec.FullName(), c.Name)
		}
		t, err := c.typeOf(rec)
		if err != nil {
			return nil, nil, err
		}
		types[i] = t
		add[i] = [2]string{c.Name, `["null",` + deriveTypes[t].avro + `]`}
	}
	out, err := ExtendSchema(rec, add...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: map.derive: %v", ErrSpec, err)
	}
	return out, types, nil
}

func (d *deriving) Schema(in avro.Schema) (avro.Schema, error) {
	rows, err := d.inner.Schema(in)
	if err != nil || rows == nil {
		return rows, err
	}
	out, types, err := d.extend(rows)
	if err != nil {
		return nil, err
	}
	if d.types == nil {
		d.types = map[avro.Schema][]string{}
	}
	d.types[in] = types
	return out, nil
}

func (d *deriving) Map(rec *Record, emit func(map[string]any) error) error {
	types := d.types[rec.Schema]
	var failed error // a column's failure stands, whatever the mapper makes of emit's error
	err := d.inner.Map(rec, func(row map[string]any) error {
		if failed != nil {
			return failed
		}
		for i, c := range d.cols {
			t := c.Type
			if types != nil {
				t = types[i]
			}
			var v any
			var err error
			if t == "" { // schemaless rows, undeclared: the result as it is
				if v, err = expr.Run(c.prog, row); err != nil {
					err = fmt.Errorf("%w: map.derive.%s %q: %v", ErrBadRecord, c.Name, c.Expr, err)
				}
			} else {
				v, err = c.eval(row, t)
			}
			if err != nil {
				failed = err
				return err
			}
			row[c.Name] = v
		}
		return emit(row)
	})
	if failed != nil {
		return failed
	}
	return err
}

// derivedProjection is map.derive on the columnar path, for rows of one
// projection: the row's Out fields' bytes followed by the derived columns'
// encodings make a record of Out (the projection's Out plus the columns),
// which the writers take as any columnar row. The expressions see only the
// fields they name, decoded as the map path decodes them.
type derivedProjection struct {
	d     *deriving
	p     *avrocodec.Projection
	out   *avrocodec.Projection // identity over the extended schema
	types []string
	// env names the fields the expressions name: (name, In index)
	env    []envField
	values map[string]any
	buf    []byte
}

type envField struct {
	name string
	in   int
}

// deriveSchemas are the Avro types of deriveTypes, parsed once.
var deriveSchemas = func() map[string]avro.Schema {
	out := map[string]avro.Schema{}
	for name, t := range deriveTypes {
		out[name] = avro.MustParse(t.avro)
	}
	return out
}()

func newDerivedProjection(d *deriving, p *avrocodec.Projection) (*derivedProjection, error) {
	ext, types, err := d.extend(p.Out)
	if err != nil {
		return nil, err
	}
	out, err := avrocodec.NewProjection(ext, nil, nil)
	if err != nil {
		return nil, err
	}
	dp := &derivedProjection{d: d, p: p, out: out, types: types, values: map[string]any{}}
	seen := map[string]bool{}
	for _, c := range d.cols {
		for _, name := range c.names {
			if seen[name] {
				continue
			}
			seen[name] = true
			for j, f := range p.Out.Fields() {
				if f.Name() == name {
					dp.env = append(dp.env, envField{name: name, in: p.Pick[j]})
				}
			}
		}
	}
	return dp, nil
}

// derive makes into dst the row of src with the derived columns.
func (dp *derivedProjection) derive(src, dst *avrocodec.Row) (*avrocodec.Row, error) {
	b := dp.buf[:0]
	for _, i := range dp.p.Pick {
		b = append(b, src.Field(i)...)
	}
	b, err := dp.appendColumns(src, b)
	dp.buf = b
	if err != nil {
		return nil, err
	}
	if err := dp.out.Scan(dst, b); err != nil {
		return nil, fmt.Errorf("%w: map.derive: %v", ErrBadRecord, err)
	}
	return dst, nil
}

// appendColumns appends to b the Avro encodings of the derived columns of
// src, a row of dp.p.
func (dp *derivedProjection) appendColumns(src *avrocodec.Row, b []byte) ([]byte, error) {
	clear(dp.values)
	for _, f := range dp.env {
		v, err := src.InValue(f.in)
		if err != nil {
			return b, fmt.Errorf("%w: %v", ErrBadRecord, err)
		}
		dp.values[f.name] = v
	}
	for k, c := range dp.d.cols {
		v, err := c.eval(dp.values, dp.types[k])
		if err != nil {
			return b, err
		}
		if v == nil {
			b = append(b, 0) // the union's null
			continue
		}
		enc, err := avro.Marshal(deriveSchemas[dp.types[k]], v)
		if err != nil {
			return b, fmt.Errorf("%w: map.derive.%s %q: the result %v: %v", ErrBadRecord, c.Name, c.Expr, v, err)
		}
		b = append(append(b, 2), enc...) // the union's second branch
	}
	return b, nil
}
