package jobs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/writers"
)

// ErrSchemaChange reports a change of a topic's writer schema that the
// output's one table cannot show next to the earlier schemas' files: a
// narrowed type (long to int), a changed type (string to int), or a field
// added without a default (not BACKWARD compatible). The load fails before
// it writes a file of that schema.
var ErrSchemaChange = errors.New("jobs: incompatible schema change")

// Schema evolution. Each writer schema's files keep their own Parquet
// schema (the writers rotate a file when the schema changes) and say which
// it is in their manifest entries (writers.File.Schema: subject, version,
// id, and the fingerprint of the file's columns); `sluice query` merges
// them into one table. What the merge can express is checked here, on the
// writer (input) schemas, in registry version order:
//
//   - a field added with a default, or removed: the merged table has the
//     union of the columns, NULL where a file does not have one;
//   - a number widened (int → long → float → double): the merged column
//     has the widest type, narrower files' values cast to it;
//   - an enum's symbols changed, a nullable union made plain or the
//     reverse: the same column.
//
// Anything else (a narrowed number, a changed type, a field added without
// a default) is ErrSchemaChange, naming the field. The check runs at the
// start of every run over every version of each topic's subject
// (<topic>-value) before the run's first write, and again for a writer
// schema met in the records that the listing did not hold (registered
// since, or under another subject) before its first record is written,
// against the versions of the subject the registry names it under (the
// first; a schema under no subject against the others under none).
type evolution struct {
	mu sync.Mutex
	// merged holds, per subject (a topic's <topic>-value; "" for schemas
	// the registry names under no subject), the widest type seen of every
	// field path ("a.b", "xs[]" for array items, "m{}" for map values),
	// nulls taken off (guarded by mu); empty until its first schema. A
	// subject's versions are one table's; schemas of other subjects met in
	// a topic's records are merged with their own subject's.
	merged map[string]map[string]avro.Schema
	// admitted holds the schema ids checked (guarded by mu).
	admitted map[int]bool
	// names holds each id's subject and version (guarded by mu).
	names map[int]sr.SubjectSchema
}

// checkEvolution checks, before a run writes anything, every version of
// the subject <topic>-value of each topic the job reads (a topic with no
// such subject is skipped: its schemas are checked as records meet them).
func (d *registryDecoder) checkEvolution(ctx context.Context, topics []string) error {
	for _, t := range topics {
		subject := t + "-value"
		versions, err := d.cl.SubjectVersions(ctx, subject)
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.StatusCode == 404 || re.StatusCode == 401 || re.StatusCode == 403) {
			// No such subject, or one the loader's registry user may not
			// list (it may still read schemas by id): its schemas are
			// checked as the records meet them.
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: versions of subject %s: %v", ErrRegistry, subject, err)
		}
		sort.Ints(versions)
		for _, v := range versions {
			ss, err := d.cl.SchemaByVersion(ctx, subject, v)
			if err != nil {
				return fmt.Errorf("%w: subject %s version %d: %v", ErrRegistry, subject, v, err)
			}
			if ss.Type != sr.TypeAvro {
				continue // the decoder refuses its records (not Avro)
			}
			s, err := parseSchema(ss.Schema.Schema)
			if err != nil || s.Type() != avro.Record {
				continue // its records are bad records (decoder.schema says why)
			}
			if err := d.evo.admit(ss, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// admitRecordSchema checks the schema of id, met in a record, unless the
// run's start checked it already.
func (d *registryDecoder) admitRecordSchema(ctx context.Context, id int, s avro.Schema) error {
	d.evo.mu.Lock()
	done := d.evo.admitted[id]
	d.evo.mu.Unlock()
	if done {
		return nil
	}
	return d.evo.admit(d.subjectVersion(ctx, id), s)
}

// subjectVersion names id by the first subject and version holding it
// (only the id when the registry cannot say).
func (d *registryDecoder) subjectVersion(ctx context.Context, id int) sr.SubjectSchema {
	d.evo.mu.Lock()
	ss, ok := d.evo.names[id]
	d.evo.mu.Unlock()
	if ok {
		return ss
	}
	ss = sr.SubjectSchema{ID: id}
	if vs, err := d.cl.SchemaVersionsByID(ctx, id); err == nil && len(vs) > 0 {
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].Subject != vs[j].Subject {
				return vs[i].Subject < vs[j].Subject
			}
			return vs[i].Version < vs[j].Version
		})
		ss.Subject, ss.Version = vs[0].Subject, vs[0].Version
	}
	return ss
}

// fileSchema names a record's writer schema for the manifest (nil when it
// is not one of the registry's).
func (d *registryDecoder) fileSchema(in avro.Schema) *writers.FileSchema {
	id, ok := d.writerSchemaID(in)
	if !ok {
		return nil
	}
	d.evo.mu.Lock()
	ss, ok := d.evo.names[id]
	d.evo.mu.Unlock()
	if !ok {
		return &writers.FileSchema{ID: id}
	}
	return &writers.FileSchema{Subject: ss.Subject, Version: ss.Version, ID: id}
}

// admit merges the writer schema s (named by ss) into the fields seen, or
// returns ErrSchemaChange naming the field it cannot merge (and merges
// nothing).
func (e *evolution) admit(ss sr.SubjectSchema, s avro.Schema) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.admitted == nil {
		e.admitted, e.names, e.merged = map[int]bool{}, map[int]sr.SubjectSchema{}, map[string]map[string]avro.Schema{}
	}
	if e.admitted[ss.ID] {
		return nil
	}
	merged := e.merged[ss.Subject]
	if merged == nil {
		merged = map[string]avro.Schema{}
		e.merged[ss.Subject] = merged
	}
	fields := map[string]avro.Schema{}
	defaults := map[string]bool{}
	flattenFields("", s, fields, defaults)
	first := len(merged) == 0
	paths := make([]string, 0, len(fields))
	for p := range fields {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	widened := map[string]avro.Schema{}
	for _, p := range paths {
		t := fields[p]
		old, seen := merged[p]
		if !seen {
			parent, top := parentPath(p)
			if _, parentSeen := merged[parent]; !first && !defaults[p] && (top || parentSeen) {
				return e.refuse(ss, p, "is added without a default")
			}
			widened[p] = t
			continue
		}
		ok, nk := typeKey(old), typeKey(t)
		if ok == nk {
			continue
		}
		or, orok := numberRank[ok]
		nr, nrok := numberRank[nk]
		switch {
		case orok && nrok && nr > or:
			widened[p] = t
		case orok && nrok:
			return e.refuse(ss, p, fmt.Sprintf("is narrowed from %s to %s", ok, nk))
		default:
			return e.refuse(ss, p, fmt.Sprintf("changes type from %s to %s", ok, nk))
		}
	}
	for p, t := range widened {
		merged[p] = t
	}
	e.admitted[ss.ID] = true
	if ss.Subject != "" {
		e.names[ss.ID] = ss
	}
	return nil
}

func (e *evolution) refuse(ss sr.SubjectSchema, field, what string) error {
	name := fmt.Sprintf("schema id %d", ss.ID)
	if ss.Subject != "" {
		name = fmt.Sprintf("subject %s version %d (schema id %d)", ss.Subject, ss.Version, ss.ID)
	}
	return fmt.Errorf("%w: %s: field %q %s: the output's one table cannot hold it next to the earlier versions' files "+
		"(BACKWARD changes only: fields added with defaults, fields removed, numbers widened int→long→float→double); "+
		"load it into another job's output, or register a compatible version", ErrSchemaChange, name, field, what)
}

// numberRank orders the numbers the merge widens.
var numberRank = map[string]int{"int": 1, "long": 2, "float": 3, "double": 4}

// flattenFields puts every field path of s into fields (its type, nulls
// taken off) and defaults (whether it has a default).
func flattenFields(prefix string, s avro.Schema, fields map[string]avro.Schema, defaults map[string]bool) {
	switch t := nonNull(s).(type) {
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			p := prefix + f.Name()
			if prefix != "" && !strings.HasSuffix(prefix, ".") {
				p = prefix + "." + f.Name()
			}
			fields[p], defaults[p] = nonNull(f.Type()), f.HasDefault()
			flattenFields(p, f.Type(), fields, defaults)
		}
	case *avro.ArraySchema:
		p := prefix + "[]"
		fields[p], defaults[p] = nonNull(t.Items()), true
		flattenFields(p, t.Items(), fields, defaults)
	case *avro.MapSchema:
		p := prefix + "{}"
		fields[p], defaults[p] = nonNull(t.Values()), true
		flattenFields(p, t.Values(), fields, defaults)
	}
}

// parentPath returns the path of the field holding p ("" and top for a
// top-level field).
func parentPath(p string) (parent string, top bool) {
	i := strings.LastIndexAny(p, ".[{")
	if i < 0 {
		return "", true
	}
	return p[:i], false
}

// nonNull takes null off a nullable union ([null, T] → T).
func nonNull(s avro.Schema) avro.Schema {
	u, ok := s.(*avro.UnionSchema)
	if !ok {
		return s
	}
	var other []avro.Schema
	for _, t := range u.Types() {
		if t.Type() != avro.Null {
			other = append(other, t)
		}
	}
	if len(other) == 1 {
		return other[0]
	}
	return s
}

// typeKey names a type as the merge compares it: records, arrays and maps
// by kind (their fields are compared by path), enums as one kind whatever
// their symbols, fixed by size, logical types with their base.
func typeKey(s avro.Schema) string {
	switch t := s.(type) {
	case *avro.RecordSchema:
		return "record"
	case *avro.ArraySchema:
		return "array"
	case *avro.MapSchema:
		return "map"
	case *avro.EnumSchema:
		return "enum"
	case *avro.FixedSchema:
		if l := t.Logical(); l != nil {
			return fmt.Sprintf("fixed(%d) %s", t.Size(), l.Type())
		}
		return fmt.Sprintf("fixed(%d)", t.Size())
	case *avro.PrimitiveSchema:
		if l := t.Logical(); l != nil {
			if d, ok := l.(*avro.DecimalLogicalSchema); ok {
				return fmt.Sprintf("%s decimal(%d,%d)", t.Type(), d.Precision(), d.Scale())
			}
			return string(t.Type()) + " " + string(l.Type())
		}
		return string(t.Type())
	case *avro.UnionSchema:
		return "union " + t.String()
	}
	return string(s.Type())
}

// checkEvolution checks the evolution of the job's writer schemas when
// they are the registry's Avro (checkEvolution of registryDecoder).
func (l *Loader) checkEvolution(ctx context.Context) error {
	l.decMu.Lock()
	d, ok := l.decoder.(*registryDecoder)
	l.decMu.Unlock()
	if !ok {
		return nil
	}
	return d.checkEvolution(ctx, l.spec.Topics())
}

// recordSchema is the writer schema of a task's record at hand: a file
// opens for a record, so it names the file's writer schema
// (writers.Config.Describe).
type recordSchema struct {
	dec    Decoder
	schema avro.Schema
}

func (r *recordSchema) describe(avro.Schema) *writers.FileSchema {
	if r.schema == nil {
		return nil
	}
	if d, ok := r.dec.(*registryDecoder); ok {
		return d.fileSchema(r.schema)
	}
	// Protobuf and JSON Schema: the registry id only.
	if ws, ok := r.dec.(writerSchemas); ok {
		if id, ok := ws.writerSchemaID(r.schema); ok {
			return &writers.FileSchema{ID: id}
		}
	}
	return nil
}
