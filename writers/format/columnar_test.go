package format_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/writers/format"
)

// wideSchema has every type the writers take, at the top level, in unions,
// in records, arrays and maps.
const wideSchema = `{"type":"record","name":"Wide","namespace":"t","fields":[
 {"name":"b","type":"boolean"},
 {"name":"i","type":"int"},
 {"name":"l","type":"long"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"s","type":"string"},
 {"name":"by","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
 {"name":"ns","type":["null","string"]},
 {"name":"sn","type":["string","null"]},
 {"name":"nl","type":["null","long"],"default":null},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsu","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
 {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"dt","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":3}},
 {"name":"decf","type":["null",{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":18,"scale":2}]},
 {"name":"id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"rec","type":{"type":"record","name":"Inner","fields":[{"name":"a","type":"int"},{"name":"t","type":["null","string"]}]}},
 {"name":"nrec","type":["null","Inner"]},
 {"name":"arr","type":{"type":"array","items":"string"}},
 {"name":"narr","type":["null",{"type":"array","items":["null","long"]}]},
 {"name":"m","type":{"type":"map","values":"long"}},
 {"name":"mrec","type":{"type":"map","values":"Inner"}},
 {"name":"arrrec","type":{"type":"array","items":"Inner"}}
]}`

// wideAvroSchema is wideSchema for the Avro-output comparisons. The generic
// path's encoder refuses two kinds of values it decodes itself: a
// ["null", fixed decimal] union ("unknown union type fixed.decimal") and
// a decimal with more digits than its precision. The columnar path copies
// such values as they are; compared here without them.
var wideAvroSchema = strings.NewReplacer(
	`["null",{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":18,"scale":2}]`,
	`{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":20,"scale":2}`,
	`"precision":38,"scale":3`, `"precision":40,"scale":3`).Replace(wideSchema)

// avroGen writes random valid Avro binary for a schema, in every encoding
// the spec allows (arrays and maps in one block, several, or blocks with a
// byte size), with repeated map keys.
type avroGen struct{ r *rand.Rand }

func (g avroGen) long(b []byte, x int64) []byte {
	return binary.AppendUvarint(b, uint64(x<<1)^uint64(x>>63))
}

func (g avroGen) str(b []byte, s string) []byte { return append(g.long(b, int64(len(s))), s...) }

func (g avroGen) text() string {
	words := []string{"", "a", "home", "https://shop.example/item/42?ref=x", "Grüße", "日本", "zzz"}
	return words[g.r.IntN(len(words))]
}

func (g avroGen) value(b []byte, s avro.Schema) []byte {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		switch ls.Logical().Type() {
		case avro.Decimal:
			n := 8
			if f, ok := s.(*avro.FixedSchema); ok {
				n = f.Size()
			} else {
				n = g.r.IntN(17) // up to 16 bytes: some over 38 digits
				b = g.long(b, int64(n))
			}
			for range n {
				b = append(b, byte(g.r.Uint32()))
			}
			return b
		case avro.UUID:
			if g.r.IntN(20) == 0 {
				return g.str(b, "not-a-uuid")
			}
			return g.str(b, uuid.New().String())
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return g.long(b, 1_700_000_000_000+g.r.Int64N(1e10)-5e9)
		case avro.TimestampMicros:
			return g.long(b, 1_700_000_000_000_000+g.r.Int64N(1e13))
		case avro.Date:
			return g.long(b, g.r.Int64N(40000)-10000)
		case avro.TimeMillis:
			return g.long(b, g.r.Int64N(86_400_000))
		case avro.TimeMicros:
			return g.long(b, g.r.Int64N(86_400_000_000))
		}
	}
	if s.Type() == avro.Null {
		return b
	}
	switch t := s.(type) {
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Null:
			return b
		case avro.Boolean:
			return append(b, byte(g.r.IntN(2)))
		case avro.Int:
			return g.long(b, int64(int32(g.r.Uint32())))
		case avro.Long:
			return g.long(b, int64(g.r.Uint64())>>g.r.IntN(64))
		case avro.Float:
			return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(g.r.NormFloat64()*1e3)))
		case avro.Double:
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(g.r.NormFloat64()*1e6))
		case avro.String:
			return g.str(b, g.text())
		case avro.Bytes:
			n := g.r.IntN(6)
			b = g.long(b, int64(n))
			for range n {
				b = append(b, byte(g.r.Uint32()))
			}
			return b
		}
	case *avro.FixedSchema:
		for range t.Size() {
			b = append(b, byte(g.r.Uint32()))
		}
		return b
	case *avro.EnumSchema:
		return g.long(b, int64(g.r.IntN(len(t.Symbols()))))
	case *avro.UnionSchema:
		k := g.r.IntN(len(t.Types()))
		return g.value(g.long(b, int64(k)), t.Types()[k])
	case *avro.RecordSchema:
		for _, f := range t.Fields() {
			b = g.value(b, f.Type())
		}
		return b
	case *avro.ArraySchema:
		return g.blocks(b, func(b []byte) []byte { return g.value(b, t.Items()) })
	case *avro.MapSchema:
		return g.blocks(b, func(b []byte) []byte {
			return g.value(g.str(b, []string{"a", "b", "c", "dd"}[g.r.IntN(4)]), t.Values())
		})
	}
	panic(fmt.Sprintf("avroGen: %s", s.Type()))
}

func (g avroGen) blocks(b []byte, item func([]byte) []byte) []byte {
	for range g.r.IntN(3) {
		n := 1 + g.r.IntN(3)
		var body []byte
		for range n {
			body = item(body)
		}
		if g.r.IntN(2) == 0 {
			b = g.long(b, int64(n))
		} else {
			b = g.long(g.long(b, -int64(n)), int64(len(body)))
		}
		b = append(b, body...)
	}
	return g.long(b, 0)
}

// mutate damages a record: a flipped byte, a cut, or bytes added.
func mutate(r *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	switch r.IntN(4) {
	case 0:
		if len(b) > 0 {
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		}
	case 1:
		b = b[:r.IntN(len(b)+1)]
	case 2:
		if len(b) > 0 {
			b[r.IntN(len(b))] = 0xff
		}
	default:
		b = append(b, 0x7f, 0x01)
	}
	return b
}

// genericAvro is hamba's generic decoder with a bound on what one count in
// the bytes may allocate (the default has none: one damaged array count
// asks for terabytes).
var genericAvro = avro.Config{MaxSliceAllocSize: 1 << 20}.Freeze()

// differential writes the same records down both paths — the generic one
// (hamba's decoder into a map, then Write) and the columnar one (Scan,
// then WriteAvroRow) — and returns the two files. A record the two paths
// disagree on is judged by an independent reader (Python's fastavro), who
// must side with the columnar path; the files then hold the records both
// took.
func differential(t *testing.T, opts format.Options, in avro.Schema, out avro.Schema, pick []int, bodies [][]byte) (mapFile, rowFile []byte) {
	t.Helper()
	proj, err := avrocodec.NewProjection(in, out, pick)
	if err != nil {
		t.Fatal(err)
	}
	var mapBuf, rowBuf bytes.Buffer
	mw, err := format.NewWriter(&mapBuf, proj.Out, opts)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := format.NewWriter(&rowBuf, proj.Out, opts)
	if err != nil {
		t.Fatal(err)
	}
	row := &avrocodec.Row{}
	// generic returns the row as a map, or the generic path's refusal.
	generic := func(body []byte) (map[string]any, error) {
		var v map[string]any
		if err := genericAvro.Unmarshal(in, body, &v); err != nil {
			return nil, err
		}
		m := map[string]any{}
		for j, i := range proj.Pick {
			m[proj.Out.Fields()[j].Name()] = v[proj.In.Fields()[i].Name()]
		}
		return m, nil
	}
	var disputed [][]byte // records the two paths disagree on
	var columnarTook []bool
	var why []string
	took := 0
	for n, body := range bodies {
		meta := format.Meta{Topic: "t", Partition: 1, Offset: int64(n), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(n))}
		v, mapErr := generic(body)
		rowErr := proj.Scan(row, body)
		if rowErr != nil && !errors.Is(rowErr, avrocodec.ErrBadValue) {
			t.Fatalf("record %d: the columnar path's error %v does not wrap ErrBadValue", n, rowErr)
		}
		if (mapErr == nil) != (rowErr == nil) {
			t.Logf("record %d: the generic decoder says %v, the columnar scan %v", n, mapErr, rowErr)
			disputed = append(disputed, body)
			columnarTook = append(columnarTook, rowErr == nil)
			why = append(why, fmt.Sprintf("generic: %v; columnar: %v", mapErr, rowErr))
			continue
		}
		if mapErr != nil {
			continue
		}
		mapErr = mw.Write(v, meta)
		rowErr = rw.(format.AvroRowWriter).WriteAvroRow(row, meta)
		if (mapErr == nil) != (rowErr == nil) {
			t.Fatalf("record %d (% x): the generic writer says %v, the columnar writer %v", n, body, mapErr, rowErr)
		}
		if rowErr != nil && !errors.Is(rowErr, avrocodec.ErrBadValue) {
			t.Fatalf("record %d: the columnar writer's error %v does not wrap ErrBadValue", n, rowErr)
		}
		if rowErr == nil {
			took++
		}
	}
	if len(disputed) > 0 {
		verdict := fastavroAccepts(t, in, disputed)
		for k, ok := range verdict {
			if ok && !columnarTook[k] && strings.Contains(why[k], "varint is longer than 5 bytes") {
				// fastavro reads any varint; the Avro spec's int is 32 bits
				// and Java's reader refuses more than 5 bytes ("Invalid int
				// encoding"), as the columnar path does. (The generic decoder
				// takes such a record and makes a row of nulls of it.)
				continue
			}
			if ok != columnarTook[k] {
				t.Errorf("fastavro says %v to % x (%s)", ok, disputed[k], why[k])
			}
		}
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%d disputes, each settled by fastavro for the columnar path", len(disputed))
	}
	if mw.Records() != int64(took) || rw.Records() != int64(took) {
		t.Fatalf("records: generic %d, columnar %d, want %d", mw.Records(), rw.Records(), took)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	if took < len(bodies)/3 {
		t.Fatalf("only %d of %d records were taken: the test data is too damaged to compare", took, len(bodies))
	}
	return mapBuf.Bytes(), rowBuf.Bytes()
}

// fastavroAccepts reports, per body, whether fastavro's schemaless reader
// decodes it as a record of s.
func fastavroAccepts(t *testing.T, s avro.Schema, bodies [][]byte) []bool {
	t.Helper()
	var in strings.Builder
	in.WriteString(s.String() + "\n")
	for _, b := range bodies {
		in.WriteString(hex.EncodeToString(b) + "\n")
	}
	const script = `
import sys, io, json, fastavro
lines = sys.stdin.read().split("\n")
schema = fastavro.parse_schema(json.loads(lines[0]))
for h in lines[1:]:
    if not h:
        continue
    try:
        fastavro.schemaless_reader(io.BytesIO(bytes.fromhex(h)), schema)
        print(1)
    except Exception:
        print(0)
`
	cmd := exec.Command("python3", "-c", script)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 with fastavro (run make deps): %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != len(bodies) {
		t.Fatalf("fastavro answered %d of %d", len(fields), len(bodies))
	}
	res := make([]bool, len(bodies))
	for k, f := range fields {
		res[k] = f == "1"
	}
	return res
}

func wideBodies(seed uint64, n int, damaged bool) (avro.Schema, [][]byte) {
	return bodiesOf(wideSchema, seed, n, damaged)
}

func bodiesOf(schema string, seed uint64, n int, damaged bool) (avro.Schema, [][]byte) {
	s := avro.MustParse(schema)
	r := rand.New(rand.NewPCG(seed, 7))
	g := avroGen{r: r}
	bodies := make([][]byte, n)
	for k := range bodies {
		bodies[k] = g.value(nil, s)
		if damaged && r.IntN(4) == 0 {
			bodies[k] = mutate(r, bodies[k])
		}
	}
	return s, bodies
}

// parquetTable reads a Parquet file into one array per column.
func parquetTable(t *testing.T, b []byte) (arrow.Schema, []arrow.Array) {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cols := make([]arrow.Array, tbl.NumCols())
	for i := range cols {
		chunks := tbl.Column(i).Data().Chunks()
		if len(chunks) == 0 {
			t.Fatalf("column %d has no chunks", i)
		}
		if cols[i], err = array.Concatenate(chunks, memory.DefaultAllocator); err != nil {
			t.Fatal(err)
		}
	}
	return *tbl.Schema(), cols
}

func TestColumnarParquetMatchesGeneric(t *testing.T) {
	for _, meta := range []bool{false, true} {
		for _, damaged := range []bool{false, true} {
			t.Run(fmt.Sprintf("meta=%v/damaged=%v", meta, damaged), func(t *testing.T) {
				s, bodies := wideBodies(uint64(3+len(fmt.Sprint(meta, damaged))), 3000, damaged)
				opts := format.Options{Kind: format.Parquet, MetadataColumns: meta, RowGroupRows: 500}
				mf, rf := differential(t, opts, s, nil, nil, bodies)
				ms, mc := parquetTable(t, mf)
				rs, rc := parquetTable(t, rf)
				if !ms.Equal(&rs) {
					t.Fatalf("schemas differ:\n%s\n%s", &ms, &rs)
				}
				for i := range mc {
					if !array.Equal(mc[i], rc[i]) {
						t.Fatalf("column %s differs:\ngeneric  %v\ncolumnar %v", ms.Field(i).Name, clipArr(mc[i]), clipArr(rc[i]))
					}
				}
				if mc[0].Len() < 1000 {
					t.Fatalf("%d rows compared", mc[0].Len())
				}
			})
		}
	}
}

func clipArr(a arrow.Array) string {
	s := fmt.Sprint(a)
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// avroRecords decodes an Avro file's records.
func avroRecords(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	dec, err := ocf.NewDecoder(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for dec.HasNext() {
		var v map[string]any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if dec.Error() != nil {
		t.Fatal(dec.Error())
	}
	return out
}

func TestColumnarAvroMatchesGeneric(t *testing.T) {
	for _, meta := range []bool{false, true} {
		t.Run(fmt.Sprintf("meta=%v", meta), func(t *testing.T) {
			s, bodies := bodiesOf(wideAvroSchema, 11, 2000, true)
			opts := format.Options{Kind: format.Avro, MetadataColumns: meta}
			mf, rf := differential(t, opts, s, nil, nil, bodies)
			mr, rr := avroRecords(t, mf), avroRecords(t, rf)
			if len(mr) != len(rr) || len(mr) < 1000 {
				t.Fatalf("records: generic %d, columnar %d", len(mr), len(rr))
			}
			for k := range mr {
				if !reflect.DeepEqual(mr[k], rr[k]) {
					t.Fatalf("record %d differs:\ngeneric  %v\ncolumnar %v", k, mr[k], rr[k])
				}
			}
		})
	}
}

// selectOf keeps and renames fields of in: what the select mapper emits.
func selectOf(t *testing.T, in avro.Schema, names ...[2]string) (avro.Schema, []int) {
	t.Helper()
	rec := in.(*avro.RecordSchema)
	var fields []*avro.Field
	var pick []int
	for _, n := range names {
		for i, f := range rec.Fields() {
			if f.Name() == n[0] {
				nf, err := avro.NewField(n[1], f.Type())
				if err != nil {
					t.Fatal(err)
				}
				fields = append(fields, nf)
				pick = append(pick, i)
			}
		}
	}
	out, err := avro.NewRecordSchema("Sel", "t", fields)
	if err != nil {
		t.Fatal(err)
	}
	return out, pick
}

func TestColumnarSelectMatchesGeneric(t *testing.T) {
	s, bodies := wideBodies(5, 2000, true)
	out, pick := selectOf(t, s, [2]string{"m", "counts"}, [2]string{"ts", "when"}, [2]string{"ns", "ns"}, [2]string{"rec", "inner"}, [2]string{"dec", "amount"})
	mf, rf := differential(t, format.Options{Kind: format.Parquet, MetadataColumns: true}, s, out, pick, bodies)
	ms, mc := parquetTable(t, mf)
	_, rc := parquetTable(t, rf)
	if ms.NumFields() != 9 {
		t.Fatalf("fields: %s", &ms)
	}
	for i := range mc {
		if !array.Equal(mc[i], rc[i]) {
			t.Fatalf("column %s differs", ms.Field(i).Name)
		}
	}
	s, bodies = bodiesOf(wideAvroSchema, 5, 2000, true)
	out, pick = selectOf(t, s, [2]string{"m", "counts"}, [2]string{"ts", "when"}, [2]string{"ns", "ns"}, [2]string{"rec", "inner"}, [2]string{"dec", "amount"})
	mf, rf = differential(t, format.Options{Kind: format.Avro}, s, out, pick, bodies)
	if mr, rr := avroRecords(t, mf), avroRecords(t, rf); !reflect.DeepEqual(mr, rr) {
		t.Fatal("select: the Avro files differ")
	}
}

// Any bytes: Scan neither panics nor lets a record through that the
// writers then choke on (a panic in a column decoder would be a scan that
// accepted too much).
func FuzzAvroScan(f *testing.F) {
	s, bodies := wideBodies(9, 40, true)
	for _, b := range bodies {
		f.Add(b)
	}
	proj, err := avrocodec.NewProjection(s, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		row := &avrocodec.Row{}
		if err := proj.Scan(row, body); err != nil {
			if !errors.Is(err, avrocodec.ErrBadValue) {
				t.Fatalf("scan error %v does not wrap ErrBadValue", err)
			}
			return
		}
		for _, kind := range []format.Kind{format.Parquet, format.Avro, format.JSONLines} {
			var buf bytes.Buffer
			w, err := format.NewWriter(&buf, proj.Out, format.Options{Kind: kind, MetadataColumns: true})
			if err != nil {
				t.Fatal(err)
			}
			meta := format.Meta{Topic: "t", Offset: 1, Timestamp: time.UnixMilli(1)}
			if rw, ok := w.(format.AvroRowWriter); ok {
				err = rw.WriteAvroRow(row, meta)
			} else {
				var m map[string]any
				if m, err = row.Map(); err == nil {
					err = w.Write(m, meta)
				}
			}
			if err != nil && !errors.Is(err, avrocodec.ErrBadValue) {
				t.Fatalf("%s: %v", kind, err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestParquetTextDictionaries: the columnar path keeps text columns as
// dictionaries while it decodes (avrocodec.StringDict) and gives a
// dictionary up for a row group whose values turn out mostly distinct, or
// when a row of the map path joins the row group. A file whose rows come
// by both paths in runs of random length, with a column of few values, a
// nullable one and one of (nearly) all distinct values over more than
// the probe, holds exactly the rows of the same records written by the map
// path alone.
func TestParquetTextDictionaries(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"T","fields":[
		{"name":"few","type":"string"},
		{"name":"maybe","type":["null","string"]},
		{"name":"unique","type":"string"},
		{"name":"kind","type":{"type":"enum","name":"K","symbols":["A","B","C"]}},
		{"name":"n","type":"long"}]}`)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	const rows = 50_000 // past the probe (16,384) in the first row group
	values := make([]map[string]any, rows)
	bodies := make([][]byte, rows)
	for k := range values {
		v := map[string]any{"few": fmt.Sprintf("f%d", r.IntN(7)), "maybe": nil,
			"unique": fmt.Sprintf("u%d-%d", k, r.IntN(1000)), "kind": []string{"A", "B", "C"}[r.IntN(3)], "n": int64(k)}
		if k > rows/2 { // the second half: a few repeats, not mostly distinct
			v["unique"] = fmt.Sprintf("u%d", r.IntN(100))
		}
		if r.IntN(3) > 0 {
			v["maybe"] = fmt.Sprintf("m%d", r.IntN(50))
		}
		values[k] = v
		b, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		bodies[k] = b
	}
	proj, err := avrocodec.NewProjection(s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, meta := range []bool{false, true} {
		opts := format.Options{Kind: format.Parquet, MetadataColumns: meta, RowGroupRows: 20_000}
		var mapBuf, mixBuf bytes.Buffer
		mw, err := format.NewWriter(&mapBuf, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		xw, err := format.NewWriter(&mixBuf, s, opts)
		if err != nil {
			t.Fatal(err)
		}
		rw := xw.(format.AvroRowWriter)
		var row avrocodec.Row
		byMap := false
		for k := range values {
			if r.IntN(2000) == 0 {
				byMap = !byMap
			}
			m := format.Meta{Topic: "t", Partition: 1, Offset: int64(k), Timestamp: time.UnixMilli(int64(k))}
			generic := map[string]any{}
			for key, v := range values[k] {
				generic[key] = v
			}
			if err := mw.Write(generic, m); err != nil {
				t.Fatal(err)
			}
			if byMap {
				generic := map[string]any{}
				for key, v := range values[k] {
					generic[key] = v
				}
				err = xw.Write(generic, m)
			} else {
				if err = proj.Scan(&row, bodies[k]); err == nil {
					err = rw.WriteAvroRow(&row, m)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := xw.Close(); err != nil {
			t.Fatal(err)
		}
		ms, mc := parquetTable(t, mapBuf.Bytes())
		xs, xc := parquetTable(t, mixBuf.Bytes())
		if !ms.Equal(&xs) {
			t.Fatalf("schemas differ:\n%s\n%s", &ms, &xs)
		}
		for i := range mc {
			if mc[i].Len() != rows || !array.Equal(mc[i], xc[i]) {
				t.Fatalf("meta=%v: column %s differs:\nmap   %v\nmixed %v", meta, ms.Field(i).Name, clipArr(mc[i]), clipArr(xc[i]))
			}
		}
	}
}
