package jobs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
)

// explode on the columnar path finds the items of an array in a record's
// bytes — blocks with a plain count, and with a negative count and a byte
// size, as Avro writers may write them — and makes each row of the
// record's bytes with one item in the array's place; a null array is a
// bad record and an empty one makes no row.
func TestExplodeProjectionFindsItems(t *testing.T) {
	in := avro.MustParse(`{"type":"record","name":"r","fields":[{"name":"a","type":"long"},
		{"name":"xs","type":["null",{"type":"array","items":"string"}]},{"name":"z","type":"string"}]}`)
	e := &explode{field: "xs"}
	out, err := e.Schema(in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := avrocodec.NewProjection(in, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	xp, err := newExplodeProjection(e, p, out)
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) []byte { return avrocodec.AppendString(nil, s) }
	record := func(xs []byte) []byte {
		b := avrocodec.AppendLong(nil, 7)
		b = append(b, xs...)
		return append(b, str("end")...)
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	// two blocks: 2 items; then -1 item of 3 bytes ("cc"); then the end
	blocks := cat(avrocodec.AppendLong(nil, 1), avrocodec.AppendLong(nil, 2), str("a"), str("bb"),
		avrocodec.AppendLong(nil, -1), avrocodec.AppendLong(nil, 3), str("cc"), avrocodec.AppendLong(nil, 0))
	cases := []struct {
		name string
		body []byte
		want string
		err  string
	}{
		{"blocks", record(blocks), "[7/a/end 7/bb/end 7/cc/end]", ""},
		{"empty", record(cat(avrocodec.AppendLong(nil, 1), avrocodec.AppendLong(nil, 0))), "[]", ""},
		{"null", record(avrocodec.AppendLong(nil, 0)), "", `explode: the field "xs" is null, not an array`},
	}
	for _, c := range cases {
		var row, orow avrocodec.Row
		if err := p.Scan(&row, c.body); err != nil {
			t.Fatalf("%s: scan: %v", c.name, err)
		}
		n, err := xp.find(&row)
		if c.err != "" {
			if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%s: %v, want a bad record: %s", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := []string{}
		for k := 0; k < n; k++ {
			b := xp.rowBody(&row, k, nil)
			if err := xp.out.Scan(&orow, b); err != nil {
				t.Fatalf("%s: row %d: %v", c.name, k, err)
			}
			m, err := orow.Map()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%v/%v/%v", m["a"], m["xs"], m["z"]))
		}
		if fmt.Sprint(got) != c.want {
			t.Fatalf("%s: rows %v, want %s", c.name, got, c.want)
		}
	}
}
