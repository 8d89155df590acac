package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/vfs"
)

// HeldSchemaPath is where a JSON job without schema_file keeps the schema
// it inferred from its first records; later tasks and runs use it as is.
func HeldSchemaPath(job string) string { return path.Join("_sluice/schemas", job+".avsc") }

// decoderFor returns the job's decoder, inferring and holding the JSON
// schema from the first records of s when the job has none yet.
func (l *Loader) decoderFor(ctx context.Context, s inputformat.Split) (Decoder, error) {
	l.decMu.Lock()
	defer l.decMu.Unlock()
	if l.decoder != nil {
		return l.decoder, nil
	}
	p := HeldSchemaPath(l.spec.Name)
	b, err := vfs.ReadFile(l.fs, p)
	if errors.Is(err, vfs.ErrNotExist) {
		if b, err = l.inferSchema(ctx, s); err != nil {
			return nil, err
		}
		if err := l.fs.MkdirAll(path.Dir(p)); err != nil {
			return nil, err
		}
		if werr := l.fs.WriteExclusive(p, b); werr != nil {
			if !errors.Is(werr, vfs.ErrExist) {
				return nil, fmt.Errorf("jobs: holding the inferred schema: %w", werr)
			}
			if b, err = vfs.ReadFile(l.fs, p); err != nil {
				return nil, err
			}
		}
		l.log.Info("inferred a JSON schema", "job", l.spec.Name, "path", p)
	} else if err != nil {
		return nil, err
	}
	schema, err := parseSchema(string(b))
	if err != nil {
		return nil, fmt.Errorf("jobs: held schema %s: %w", p, err)
	}
	l.decoder = &jsonDecoder{schema: schema}
	return l.decoder, nil
}

// inferSchema reads up to decode.infer_sample JSON objects from the start
// of s and returns an Avro record schema that types them: every field
// optional; numbers long unless one is fractional (double); nested objects
// records; arrays of their first element's type.
func (l *Loader) inferSchema(ctx context.Context, s inputformat.Split) ([]byte, error) {
	rd, err := inputformat.NewReader(l.kcl, s, l.opts.Reader)
	if err != nil {
		return nil, err
	}
	var sample []map[string]any
	for len(sample) < l.spec.Decode.InferSample {
		recs, done, err := rd.Next(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if v, err := decodeJSONObject(r.Value); err == nil && len(sample) < l.spec.Decode.InferSample {
				sample = append(sample, v)
			}
		}
		if done {
			break
		}
	}
	if len(sample) == 0 {
		return nil, fmt.Errorf("%w: decode: no JSON object in %s to infer a schema from; give decode.schema_file", ErrSpec, s)
	}
	vals := make([]any, len(sample))
	for i, v := range sample {
		vals[i] = v
	}
	t := inferType(vals, "Record", l.spec.Name)
	t["namespace"] = "sluice.inferred"
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	if _, err := parseSchema(string(b)); err != nil {
		return nil, fmt.Errorf("jobs: inferred schema does not parse: %w", err)
	}
	return b, nil
}

// inferType returns the Avro type (as JSON) of a record made of objs.
func inferType(objs []any, name, doc string) map[string]any {
	fieldVals := map[string][]any{}
	for _, o := range objs {
		if m, ok := o.(map[string]any); ok {
			for k, v := range m {
				fieldVals[k] = append(fieldVals[k], v)
			}
		}
	}
	names := make([]string, 0, len(fieldVals))
	for k := range fieldVals {
		names = append(names, k)
	}
	sort.Strings(names)
	fields := make([]any, 0, len(names))
	for _, n := range names {
		fields = append(fields, map[string]any{"name": n, "type": []any{"null", valueType(fieldVals[n], name+"_"+n)}, "default": nil})
	}
	return map[string]any{"type": "record", "name": name, "doc": "inferred by sluice for job " + doc, "fields": fields}
}

// valueType is the Avro type of a field from its sample values.
func valueType(vals []any, name string) any {
	kind := ""
	var objs, elems []any
	for _, v := range vals {
		k := ""
		switch x := v.(type) {
		case nil:
			continue
		case bool:
			k = "boolean"
		case int64:
			k = "long"
		case float64:
			k = "double"
		case string:
			k = "string"
		case map[string]any:
			k = "record"
			objs = append(objs, x)
		case []any:
			k = "array"
			elems = append(elems, x...)
		}
		switch {
		case kind == "":
			kind = k
		case kind == "long" && k == "double", kind == "double" && k == "long":
			kind = "double"
		}
	}
	switch kind {
	case "record":
		return inferType(objs, name, "")
	case "array":
		return map[string]any{"type": "array", "items": []any{"null", valueType(elems, name+"_item")}}
	case "":
		return "string"
	}
	return kind
}
