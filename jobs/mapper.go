package jobs

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
	"github.com/hamba/avro/v2"
)

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a decoded log record as a Mapper sees it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Headers   []Header
	// Schema types Value (nil for schemaless JSON).
	Schema avro.Schema
	// Value holds the decoded fields. A mapper may change and emit it.
	Value map[string]any
}

// Mapper turns a decoded record into zero or more rows. One Mapper value
// serves one task at a time (the runner makes one per task), so it may keep
// state without locks.
type Mapper interface {
	// Schema returns the schema of the rows Map emits for records typed by
	// in (nil in means schemaless JSON; a nil result is allowed only for
	// jsonl output). It is called once per distinct input schema.
	Schema(in avro.Schema) (avro.Schema, error)
	// Map emits the rows of rec: zero, one or many (a mapper other than
	// the built-in identity, where and select may emit many; with
	// metadata columns they carry _row, their index). An error is the
	// record's fault: it is handled by on_bad_record, and none of the
	// record's rows is written (they are held until Map returns). emit
	// takes ownership of row: give each row a map of its own.
	Map(rec *Record, emit func(row map[string]any) error) error
}

// MapperConfig is what a mapper factory gets from the job spec.
type MapperConfig struct {
	// Options is map.options of the spec, as written.
	Options map[string]any
	// Select is map.select (the select mapper's configuration).
	Select *Select
	// Field is map.field (the explode mapper's array field).
	Field string
}

// MapperFactory builds a mapper for one task.
type MapperFactory func(cfg MapperConfig) (Mapper, error)

var mappers = struct {
	sync.Mutex
	byName map[string]MapperFactory
}{byName: map[string]MapperFactory{}}

// RegisterMapper makes a mapper available to job specs as map.mapper:
// name. Call it from an init function or from main before running jobs;
// registering a name twice replaces the first.
func RegisterMapper(name string, f MapperFactory) {
	mappers.Lock()
	defer mappers.Unlock()
	mappers.byName[name] = f
}

func lookupMapper(name string) (MapperFactory, bool) {
	mappers.Lock()
	defer mappers.Unlock()
	f, ok := mappers.byName[name]
	return f, ok
}

// MapperNames lists the registered mappers, sorted.
func MapperNames() []string {
	mappers.Lock()
	defer mappers.Unlock()
	out := make([]string, 0, len(mappers.byName))
	for n := range mappers.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func init() {
	RegisterMapper("identity", func(MapperConfig) (Mapper, error) { return identity{}, nil })
	// where is identity; the filter is map.where, applied to every mapper.
	RegisterMapper("where", func(MapperConfig) (Mapper, error) { return identity{}, nil })
	RegisterMapper("select", newSelectMapper)
	RegisterMapper("explode", newExplode)
}

// identity emits the record's value as it is.
type identity struct{}

func (identity) Schema(in avro.Schema) (avro.Schema, error) { return in, nil }
func (identity) Map(rec *Record, emit func(map[string]any) error) error {
	return emit(rec.Value)
}

// selectMapper keeps and renames top-level fields.
type selectMapper struct {
	keep   []string          // empty: all fields
	rename map[string]string // old → new
	pairs  [][2]string       // (old, new) of the schema last seen
	last   avro.Schema
}

func newSelectMapper(cfg MapperConfig) (Mapper, error) {
	if cfg.Select == nil || (len(cfg.Select.Keep) == 0 && len(cfg.Select.Rename) == 0) {
		return nil, fmt.Errorf("%w: map.select: give keep and/or rename", ErrSpec)
	}
	m := &selectMapper{keep: cfg.Select.Keep, rename: cfg.Select.Rename}
	if err := m.check(nil); err != nil {
		return nil, err
	}
	return m, nil
}

// check refuses a selection whose output names are not distinct or whose
// renames do not apply: two renames onto one name, a rename onto a field
// kept under that name, a rename of a field keep drops, a field kept twice
// and, when names (the input record's fields) are known, a kept or renamed
// field the record does not have. It runs at validation (with the schema
// when schema_file gives it) and for each input schema, before any row.
func (m *selectMapper) check(names []string) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrSpec, field, fmt.Sprintf(format, args...))
	}
	kept := map[string]bool{}
	for i, n := range m.keep {
		if n == "" || kept[n] {
			return bad(fmt.Sprintf("map.select.keep[%d]", i), "%q is empty or listed twice", n)
		}
		kept[n] = true
	}
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	for i, n := range m.keep {
		if names != nil && !has[n] {
			return bad(fmt.Sprintf("map.select.keep[%d]", i), "%q is not a field of the record (fields: %s)", n, fieldList(names))
		}
	}
	olds := make([]string, 0, len(m.rename))
	for old := range m.rename {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		field := "map.select.rename." + old
		switch {
		case old == "" || m.rename[old] == "":
			return bad("map.select.rename", "%q → %q: both names must be given", old, m.rename[old])
		case len(m.keep) > 0 && !kept[old]:
			return bad(field, "renames %q, which keep drops (add it to keep or remove the rename)", old)
		case names != nil && !has[old]:
			return bad(field, "%q is not a field of the record (fields: %s)", old, fieldList(names))
		}
	}
	src := m.keep
	if len(src) == 0 {
		src = names
	}
	if src == nil { // every field is kept and the fields are not known yet: renames must differ
		by := map[string]string{}
		for _, old := range olds {
			if other, ok := by[m.rename[old]]; ok {
				return bad("map.select.rename."+old, "%q and %q are both renamed to %q", other, old, m.rename[old])
			}
			by[m.rename[old]] = old
		}
		return nil
	}
	from := map[string]string{} // output name -> input name
	for _, p := range m.pairsFor(src) {
		if other, ok := from[p[1]]; ok {
			a, b := other, p[0]
			if _, renamed := m.rename[a]; !renamed {
				a, b = b, a
			}
			if _, renamed := m.rename[b]; renamed {
				return bad("map.select.rename."+a, "%q and %q are both renamed to %q", min(a, b), max(a, b), p[1])
			}
			return bad("map.select.rename."+a, "%q → %q collides with the field %q, which is kept under that name (rename it too, or drop it)", a, p[1], b)
		}
		from[p[1]] = p[0]
	}
	return nil
}

func (m *selectMapper) Schema(in avro.Schema) (avro.Schema, error) {
	if in == nil {
		m.pairs = m.pairsFor(nil)
		return nil, nil
	}
	rec, ok := in.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: map.select needs record values", ErrSpec)
	}
	byName := map[string]*avro.Field{}
	names := []string{}
	for _, f := range rec.Fields() {
		byName[f.Name()] = f
		names = append(names, f.Name())
	}
	if err := m.check(names); err != nil {
		return nil, err
	}
	m.pairs = m.pairsFor(names)
	fields := make([]*avro.Field, 0, len(m.pairs))
	for _, p := range m.pairs {
		f, ok := byName[p[0]]
		if !ok {
			return nil, fmt.Errorf("%w: map.select: field %q is not in the record schema %s (fields: %s)", ErrSpec, p[0], rec.FullName(), fieldList(names))
		}
		var opts []avro.SchemaOption
		if f.HasDefault() {
			opts = append(opts, avro.WithDefault(f.Default()))
		}
		nf, err := avro.NewField(p[1], f.Type(), opts...)
		if err != nil {
			return nil, fmt.Errorf("%w: map.select: %v", ErrSpec, err)
		}
		fields = append(fields, nf)
	}
	out, err := avro.NewRecordSchema(rec.Name(), rec.Namespace(), fields)
	if err != nil {
		return nil, fmt.Errorf("%w: map.select: %v", ErrSpec, err)
	}
	m.last = out
	return out, nil
}

// pairsFor returns (old, new) names: the kept fields (or all of names) in
// order, renamed.
func (m *selectMapper) pairsFor(names []string) [][2]string {
	src := m.keep
	if len(src) == 0 {
		src = names
	}
	out := make([][2]string, 0, len(src))
	for _, n := range src {
		to := n
		if r, ok := m.rename[n]; ok {
			to = r
		}
		out = append(out, [2]string{n, to})
	}
	return out
}

// pick returns, for each output field of records of rec, the index of the
// input field it comes from (-1: not in rec; Schema has refused that).
func (m *selectMapper) pick(rec *avro.RecordSchema) []int {
	index := map[string]int{}
	names := make([]string, len(rec.Fields()))
	for i, f := range rec.Fields() {
		index[f.Name()], names[i] = i, f.Name()
	}
	pairs := m.pairsFor(names)
	out := make([]int, len(pairs))
	for j, p := range pairs {
		if i, ok := index[p[0]]; ok {
			out[j] = i
		} else {
			out[j] = -1
		}
	}
	return out
}

func (m *selectMapper) Map(rec *Record, emit func(map[string]any) error) error {
	pairs := m.pairs
	if rec.Schema == nil && len(m.keep) == 0 {
		names := make([]string, 0, len(rec.Value))
		for k := range rec.Value {
			names = append(names, k)
		}
		pairs = m.pairsFor(names)
	}
	row := make(map[string]any, len(pairs))
	for _, p := range pairs {
		row[p[1]] = rec.Value[p[0]]
	}
	if len(row) < len(pairs) { // schemaless: a rename met a field of the same name
		from := make(map[string]string, len(pairs))
		for _, p := range pairs {
			if other, ok := from[p[1]]; ok {
				return badRecord("map.select.rename: the record's fields %q and %q would both be named %q", min(other, p[0]), max(other, p[0]), p[1])
			}
			from[p[1]] = p[0]
		}
	}
	return emit(row)
}

// fieldList names at most 20 fields (a schema may have thousands).
func fieldList(names []string) string {
	if len(names) <= 20 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:20], ", "), len(names)-20)
}

// where is a compiled map.where filter.
type where struct {
	src  string
	prog *vm.Program
	// names are the identifiers the filter names: the fields the columnar
	// path decodes for it.
	names []string
}

func compileWhere(src string) (*where, error) {
	p, err := expr.Compile(src, expr.AsBool(), expr.AllowUndefinedVariables())
	if err != nil {
		return nil, err
	}
	w := &where{src: src, prog: p}
	node := p.Node()
	ast.Walk(&node, identifiers{seen: map[string]bool{}, names: &w.names})
	return w, nil
}

// identifiers collects the names of identifier nodes.
type identifiers struct {
	seen  map[string]bool
	names *[]string
}

func (v identifiers) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok && !v.seen[id.Value] {
		v.seen[id.Value] = true
		*v.names = append(*v.names, id.Value)
	}
}

// keep evaluates the filter over a row's fields.
func (w *where) keep(row map[string]any) (bool, error) {
	out, err := expr.Run(w.prog, row)
	if err != nil {
		return false, fmt.Errorf("%w: map.where %q: %v", ErrBadRecord, w.src, err)
	}
	b, _ := out.(bool)
	return b, nil
}

// ExtendSchema returns the record schema in with fields added at the end:
// what a mapper that adds columns returns from Schema. Each added field is
// name and an Avro type in JSON ("string", `["null","long"]`, ...).
func ExtendSchema(in avro.Schema, add ...[2]string) (avro.Schema, error) {
	rec, ok := in.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("jobs: extend schema: want a record, got %v", in)
	}
	fields := make([]*avro.Field, 0, len(rec.Fields())+len(add))
	for _, f := range rec.Fields() {
		var opts []avro.SchemaOption
		if f.HasDefault() {
			opts = append(opts, avro.WithDefault(f.Default()))
		}
		nf, err := avro.NewField(f.Name(), f.Type(), opts...)
		if err != nil {
			return nil, err
		}
		fields = append(fields, nf)
	}
	for _, a := range add {
		t, err := parseSchema(a[1])
		if err != nil {
			return nil, fmt.Errorf("jobs: extend schema: field %q: %w", a[0], err)
		}
		nf, err := avro.NewField(a[0], t)
		if err != nil {
			return nil, err
		}
		fields = append(fields, nf)
	}
	return avro.NewRecordSchema(rec.Name(), rec.Namespace(), fields)
}
