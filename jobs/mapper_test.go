package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/hamba/avro/v2"
)

var pvSchema = avro.MustParse(`{"type":"record","name":"PV","fields":[
	{"name":"url","type":"string"},{"name":"status","type":"int"},{"name":"ref","type":["null","string"],"default":null}]}`)

func collect(t *testing.T, m Mapper, rec *Record) []map[string]any {
	t.Helper()
	var rows []map[string]any
	if err := m.Map(rec, func(r map[string]any) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestSelectMapper(t *testing.T) {
	f, _ := lookupMapper("select")
	m, err := f(MapperConfig{Select: &Select{Keep: []string{"status", "url"}, Rename: map[string]string{"url": "page"}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Schema(pvSchema)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range out.(*avro.RecordSchema).Fields() {
		names = append(names, f.Name())
	}
	if !reflect.DeepEqual(names, []string{"status", "page"}) {
		t.Fatalf("fields %v", names)
	}
	rows := collect(t, m, &Record{Schema: pvSchema, Value: map[string]any{"url": "/a", "status": 200, "ref": nil}})
	if !reflect.DeepEqual(rows, []map[string]any{{"status": 200, "page": "/a"}}) {
		t.Fatalf("rows %v", rows)
	}
	// Keeping a field the schema lacks is a spec error naming it.
	m2, _ := f(MapperConfig{Select: &Select{Keep: []string{"nope"}}})
	if _, err := m2.Schema(pvSchema); !errors.Is(err, ErrSpec) {
		t.Fatalf("got %v", err)
	}
	if _, err := f(MapperConfig{Select: &Select{}}); !errors.Is(err, ErrSpec) {
		t.Fatalf("empty select: %v", err)
	}
}

func TestWhere(t *testing.T) {
	w, err := compileWhere(`status >= 200 && status < 300 && url startsWith "/p"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		row  map[string]any
		keep bool
	}{
		{map[string]any{"status": 200, "url": "/p/1"}, true},
		{map[string]any{"status": int64(204), "url": "/p"}, true},
		{map[string]any{"status": 404, "url": "/p/1"}, false},
		{map[string]any{"status": 200, "url": "/home"}, false},
	} {
		got, err := w.keep(c.row)
		if err != nil || got != c.keep {
			t.Fatalf("%v: %v %v", c.row, got, err)
		}
	}
	// A row the expression cannot evaluate is a bad record, not a crash.
	if _, err := w.keep(map[string]any{"status": "x", "url": 5}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("got %v", err)
	}
	if _, err := compileWhere("status >="); err == nil {
		t.Fatal("bad expression compiled")
	}
}

func TestExtendSchema(t *testing.T) {
	s, err := ExtendSchema(pvSchema, [2]string{"section", `"string"`}, [2]string{"n", `["null","long"]`})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.(*avro.RecordSchema).Fields()); got != 5 {
		t.Fatalf("%d fields", got)
	}
	if _, err := ExtendSchema(pvSchema, [2]string{"x", `"nosuchtype"`}); err == nil {
		t.Fatal("bad type accepted")
	}
}

func TestDecoders(t *testing.T) {
	ctx := context.Background()
	b, _ := avro.Marshal(pvSchema, map[string]any{"url": "/a", "status": 200, "ref": "r"})
	d := &avroFileDecoder{schema: pvSchema}
	if _, v, err := d.Decode(ctx, nil, b); err != nil || v["url"] != "/a" || v["ref"] != "r" {
		t.Fatalf("avro: %v %v", v, err)
	}
	for _, bad := range [][]byte{nil, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, b[:2]} {
		if _, _, err := d.Decode(ctx, nil, bad); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("avro %x: %v", bad, err)
		}
	}
	rd := &registryDecoder{cache: map[int]avro.Schema{7: pvSchema}}
	framed := append([]byte{0, 0, 0, 0, 7}, b...)
	if s, v, err := rd.Decode(ctx, nil, framed); err != nil || s != pvSchema || v["status"] != 200 {
		t.Fatalf("framed: %v %v", v, err)
	}
	for _, bad := range [][]byte{b, {0, 0, 0}, {1, 0, 0, 0, 7, 1}} {
		if _, _, err := rd.Decode(ctx, nil, bad); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("framing %x: %v", bad, err)
		}
	}
	j := &jsonDecoder{}
	if _, v, err := j.Decode(ctx, nil, []byte(`{"a": 12345678901234567, "b": 1.5, "c": [1, {"d": 2}]}`)); err != nil ||
		v["a"] != int64(12345678901234567) || v["b"] != 1.5 || v["c"].([]any)[1].(map[string]any)["d"] != int64(2) {
		t.Fatalf("json: %#v %v", v, err)
	}
	for _, bad := range []string{"", "[1]", "{", `{"a":1} {"b":2}`} {
		if _, _, err := j.Decode(ctx, nil, []byte(bad)); !errors.Is(err, ErrBadRecord) {
			t.Fatalf("json %q: %v", bad, err)
		}
	}
	kv := newKVDecoder(true)
	if _, v, err := kv.Decode(ctx, []byte("k"), nil); err != nil || v["key"] != "k" || v["value"] != nil {
		t.Fatalf("string: %v %v", v, err)
	}
}

func TestInferType(t *testing.T) {
	objs := []any{
		map[string]any{"a": int64(1), "b": "x", "n": map[string]any{"c": true}, "l": []any{int64(1)}},
		map[string]any{"a": 2.5, "z": nil},
	}
	got := inferType(objs, "R", "job")
	s, err := parseSchema(mustJSON(t, got))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, f := range s.(*avro.RecordSchema).Fields() {
		fields[f.Name()] = f.Type().(*avro.UnionSchema).Types()[1].String()
	}
	if fields["a"] != `"double"` || fields["b"] != `"string"` || fields["z"] != `"string"` {
		t.Fatalf("fields %v", fields)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
