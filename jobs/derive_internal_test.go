package jobs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// map.derive on the map path: the columns' types (declared, or the
// result's over the rows' field types), the conversion of results to them,
// and a failing expression or an unconvertible result as a bad record.
func TestDeriveTypesAndErrors(t *testing.T) {
	in := avro.MustParse(`{"type":"record","name":"pv","fields":[{"name":"id","type":"long"},{"name":"page","type":"string"},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"ref","type":["null","string"]}]}`)
	cols, err := compileDerive(Derive{
		{Name: "twice", Expr: "id * 2"}, {Name: "hour", Expr: "ts.Hour()"}, {Name: "p", Expr: `page + "!"`},
		{Name: "at", Expr: "ts"}, {Name: "half", Expr: "id / 2", Type: "long"}, {Name: "small", Expr: "id", Type: "int"},
		{Name: "has_ref", Expr: "ref != nil"}, {Name: "day", Expr: "date(ts)"}, {Name: "parsed", Expr: `date("2024-05-01")`, Type: "date"},
		{Name: "section", Expr: `split(page, "/")[1]`},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := withDerive(identity{}, cols)
	out, err := m.Schema(in)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, f := range out.(*avro.RecordSchema).Fields()[4:] {
		types = append(types, f.Name()+":"+string(f.Type().(*avro.UnionSchema).Types()[1].Type()))
	}
	if got := strings.Join(types, " "); got != "twice:long hour:long p:string at:long half:long small:int has_ref:boolean day:int parsed:int section:string" {
		t.Fatalf("derived types %s", got)
	}
	ts := time.UnixMilli(1_700_000_000_000).UTC()
	run := func(id int64) (map[string]any, error) {
		var row map[string]any
		err := m.Map(&Record{Schema: in, Value: map[string]any{"id": id, "page": "/a", "ts": ts, "ref": nil}}, func(r map[string]any) error {
			row = r
			return nil
		})
		return row, err
	}
	row, err := run(10)
	if err != nil {
		t.Fatal(err)
	}
	if row["twice"] != int64(20) || row["hour"] != int64(ts.Hour()) || row["p"] != "/a!" || row["at"] != ts || row["half"] != int64(5) ||
		row["small"] != 10 || row["has_ref"] != false || row["day"] != time.Date(2023, 11, 14, 0, 0, 0, 0, time.UTC) ||
		row["parsed"] != time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC) || row["section"] != "a" {
		t.Fatalf("row %v", row)
	}
	if _, err := run(11); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), `map.derive.half "id / 2": the result 5.5: 5.5 is not a whole number`) {
		t.Fatalf("5.5 as a long: %v", err)
	}
	if _, err := run(1 << 40); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "map.derive.small") {
		t.Fatalf("2^40 as an int: %v", err)
	}
	bad, _ := compileDerive(Derive{{Name: "x", Expr: `int("x")`, Type: "long"}})
	m = withDerive(identity{}, bad)
	if _, err := m.Schema(in); err != nil {
		t.Fatal(err)
	}
	if _, err := run(1); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), `map.derive.x "int(\"x\")"`) {
		t.Fatalf("a failing expression: %v", err)
	}
}
