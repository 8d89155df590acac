package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

// TestSelectRenameRefusedAtFirstSchema: without schema_file the schema
// comes with the first record (registry); a rename onto a field the record
// keeps is refused then, naming map.select.rename, before any row; for
// schemaless JSON the record holding both names is a bad record, not a row
// with one value silently lost.
func TestSelectRenameRefusedAtFirstSchema(t *testing.T) {
	schema := avro.MustParse(`{"type": "record", "name": "pv", "fields": [{"name": "id", "type": "long"}, {"name": "page", "type": "string"}]}`)
	for _, c := range []struct {
		sel  Select
		want string
	}{
		{Select{Rename: map[string]string{"id": "page"}}, `map.select.rename.id: "id" → "page" collides with the field "page"`},
		{Select{Rename: map[string]string{"nope": "x"}}, `map.select.rename.nope: "nope" is not a field of the record (fields: id, page)`},
		{Select{Keep: []string{"id", "nope"}}, `map.select.keep[1]: "nope" is not a field of the record`},
	} {
		m, err := newSelectMapper(MapperConfig{Select: &c.sel})
		if err != nil {
			t.Fatalf("%+v refused before the schema is known: %v", c.sel, err)
		}
		if _, err := m.Schema(schema); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.sel, err, c.want)
		}
	}
	m, err := newSelectMapper(MapperConfig{Select: &Select{Rename: map[string]string{"id": "page", "page": "id"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Schema(schema); err != nil {
		t.Fatalf("a swap refused: %v", err)
	}

	m, err = newSelectMapper(MapperConfig{Select: &Select{Rename: map[string]string{"id": "page"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Schema(nil); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	emit := func(r map[string]any) error { rows = append(rows, r); return nil }
	err = m.Map(&Record{Value: map[string]any{"id": 1, "page": "/a"}}, emit)
	if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), `map.select.rename: the record's fields "id" and "page" would both be named "page"`) {
		t.Fatalf("a record with both names: %v (rows %v)", err, rows)
	}
	if err := m.Map(&Record{Value: map[string]any{"id": 2}}, emit); err != nil || len(rows) != 1 || rows[0]["page"] != 2 {
		t.Fatalf("a record without the target: %v, rows %v", err, rows)
	}
}
