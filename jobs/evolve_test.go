package jobs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/jobs/query"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// The four versions of the evolving topic's schema (subject evo-value):
// v2 adds a field with a default (country) and a nested one (page.title),
// v3 removes note, v4 widens clicks int→long and score float→double.
var evoSchemas = []string{
	`{"type":"record","name":"ev","fields":[
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"id","type":"long"},
		{"name":"clicks","type":"int"},
		{"name":"score","type":"float"},
		{"name":"note","type":"string"},
		{"name":"page","type":{"type":"record","name":"page","fields":[{"name":"path","type":"string"}]}}]}`,
	`{"type":"record","name":"ev","fields":[
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"id","type":"long"},
		{"name":"clicks","type":"int"},
		{"name":"score","type":"float"},
		{"name":"note","type":"string"},
		{"name":"country","type":["null","string"],"default":null},
		{"name":"page","type":{"type":"record","name":"page","fields":[{"name":"path","type":"string"},{"name":"title","type":"string","default":""}]}}]}`,
	`{"type":"record","name":"ev","fields":[
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"id","type":"long"},
		{"name":"clicks","type":"int"},
		{"name":"score","type":"float"},
		{"name":"country","type":["null","string"],"default":null},
		{"name":"page","type":{"type":"record","name":"page","fields":[{"name":"path","type":"string"},{"name":"title","type":"string","default":""}]}}]}`,
	`{"type":"record","name":"ev","fields":[
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"id","type":"long"},
		{"name":"clicks","type":"long"},
		{"name":"score","type":"double"},
		{"name":"country","type":["null","string"],"default":null},
		{"name":"page","type":{"type":"record","name":"page","fields":[{"name":"path","type":"string"},{"name":"title","type":"string","default":""}]}}]}`,
}

const evoPer = 300 // records per schema version

// evoRecords frames n records of schema version v (1-based) under id,
// offsets from first, in hour 10+v-1 of 2024-05-01 (v3 and v4 share hour 12).
func evoRecords(t *testing.T, v, id int, first int64) []*kgo.Record {
	s := avro.MustParse(evoSchemas[v-1])
	hour := 9 + min(v, 3)
	var recs []*kgo.Record
	for i := 0; i < evoPer; i++ {
		n := first + int64(i)
		row := map[string]any{"ts": time.Date(2024, 5, 1, hour, i%60, 0, 0, time.UTC), "id": n,
			"page": map[string]any{"path": fmt.Sprintf("/p/%d", n), "title": fmt.Sprintf("t%d", n)}}
		if v < 4 {
			row["clicks"], row["score"] = int(n), float32(n)+0.5
		} else {
			row["clicks"], row["score"] = int64(n)+math.MaxInt32, float64(n)+0.25
		}
		if v < 3 {
			row["note"] = fmt.Sprintf("n%d", n)
		}
		if v >= 2 {
			row["country"] = "DE"
		}
		body, err := avro.Marshal(s, row)
		if err != nil {
			t.Fatal(err)
		}
		val := make([]byte, 5, 5+len(body))
		binary.BigEndian.PutUint32(val[1:], uint32(id))
		recs = append(recs, &kgo.Record{Topic: "evo", Partition: 0, Value: append(val, body...)})
	}
	return recs
}

// evoAnswers runs the questions the test asks of the merged table.
func evoAnswers(t *testing.T, uri string) string { return evoAnswersOf(t, uri, "evo") }

// evoAnswersOf asks them of table.
func evoAnswersOf(t *testing.T, uri, table string) string {
	t.Helper()
	ctx := context.Background()
	e, err := query.Open(ctx, uri, query.Options{CacheDir: t.TempDir(), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out []string
	for _, q := range []string{
		`SELECT count(*), count(DISTINCT _offset), min(_offset), max(_offset) FROM ` + table,
		// country and page.title exist from v2 on: NULL for v1's rows.
		`SELECT count(*) FILTER (WHERE country IS NULL), count(*) FILTER (WHERE page.title IS NULL),
			min(id) FILTER (WHERE country IS NOT NULL), bool_and(page.title = 't' || id) FILTER (WHERE page.title IS NOT NULL) FROM ` + table,
		// note is gone from v3 on.
		`SELECT count(note), max(id) FILTER (WHERE note IS NOT NULL), bool_and(note = 'n' || id) FROM ` + table,
		// clicks and score, widened: every version's value, cast.
		`SELECT typeof(any_value(clicks)), typeof(any_value(score)),
			bool_and(clicks = CASE WHEN id < 900 THEN id ELSE id + 2147483647 END),
			bool_and(score = CASE WHEN id < 900 THEN id + 0.5 ELSE id + 0.25 END) FROM ` + table,
		`SELECT hr, count(*), count(country), count(note) FROM ` + table + ` GROUP BY hr ORDER BY hr`,
		// a query pruned to v1's hour still has the later versions' columns
		`SELECT count(*), count(country), count(page.title) FROM ` + table + ` WHERE hr = 10`,
	} {
		rows, _, err := e.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			v := make([]any, len(cols))
			p := make([]any, len(cols))
			for i := range v {
				p[i] = &v[i]
			}
			if err := rows.Scan(p...); err != nil {
				t.Fatal(err)
			}
			words := make([]string, len(v))
			for i, x := range v {
				words[i] = fmt.Sprint(x)
			}
			out = append(out, strings.Join(words, " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return strings.Join(out, "\n")
}

// outputFiles lists every file under dir but the job's lock and run
// records (what a failed load must not add to).
func outputFiles(t *testing.T, dir string) []string {
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/_sluice/runs/") && !strings.Contains(p, "/_sluice/lock") {
			files = append(files, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	sort.Strings(files)
	return files
}

// A topic whose Avro schema evolves three times (a field added with a
// default, one removed, numbers widened) loads into one table: each
// version's files keep their own Parquet schema and name it in their
// manifests, the query engine (sluice query) answers across all versions
// (counts; columns of later versions NULL for earlier rows; widened values
// equal), --tables shows the versions, which hours hold each; a replay
// across versions gives the same answers; an incompatible version fails
// the next load with the field named and nothing written.
func TestSchemaEvolutionOneTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, registry := startSluiceWithRegistry(t)
	cl, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	register := func(text string) int {
		ss, err := cl.CreateSchema(ctx, "evo-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatalf("registering: %v", err)
		}
		return ss.ID
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "warehouse", "evo")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "evo", b.Addr, "evo", 200, "registry: "+registry, "file://"+out))
	ids := make([]int, 4)
	for v := 1; v <= 4; v++ {
		ids[v-1] = register(evoSchemas[v-1]) // the registry's default BACKWARD check admits each
		produceAll(t, ctx, b.Addr, "evo", map[bool]int32{true: 1}[v == 1], evoRecords(t, v, ids[v-1], int64(v-1)*evoPer))
		if v == 3 {
			continue // v3 and v4 load in one run: a split holding both rotates its file
		}
		if _, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2}); err != nil {
			t.Fatalf("run after v%d: %v", v, err)
		}
	}
	checkExactlyOnce(t, out, "evo", map[int32]int64{0: 4 * evoPer}, true)

	// Every file names its writer schema; the files of one version share
	// a column fingerprint, the versions' differ.
	fps := map[int]string{}
	lfs, err := filesystem.NewLocalNoSync(out)
	if err != nil {
		t.Fatal(err)
	}
	store := writers.NewStore(lfs, writers.StoreOptions{})
	ms, err := store.Commits("evo", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, f := range m.Files {
			s := f.Schema
			if s == nil || s.Subject != "evo-value" || s.Version < 1 || s.Version > 4 || s.ID != ids[s.Version-1] || !strings.HasPrefix(s.Fingerprint, "parquet:") {
				t.Fatalf("file %s: schema %+v (ids %v)", f.Final, s, ids)
			}
			if fp, ok := fps[s.Version]; ok && fp != s.Fingerprint {
				t.Fatalf("version %d has two fingerprints %s %s", s.Version, fp, s.Fingerprint)
			}
			fps[s.Version] = s.Fingerprint
		}
	}
	if len(fps) != 4 || fps[1] == fps[2] || fps[2] == fps[3] || fps[3] == fps[4] {
		t.Fatalf("fingerprints per version %v", fps)
	}

	uri := "file://" + filepath.Dir(out)
	const want = "1200 1200 0 1199\n" +
		"300 300 300 true\n" +
		"600 599 true\n" +
		"BIGINT DOUBLE true true\n" +
		"10 300 0 300\n11 300 300 300\n12 600 600 0\n" +
		"300 0 0"
	got := evoAnswers(t, uri)
	if got != want {
		t.Fatalf("answers across the versions:\n%s\nwant\n%s", got, want)
	}

	// The same topic into Avro files: one table the same way.
	avroOut := filepath.Join(dir, "warehouse", "evo_avro")
	adir := t.TempDir()
	aspec, _ := writeJob(t, adir, strings.Replace(fmt.Sprintf(pageViewJob, "evo_avro", b.Addr, "evo", 200, "registry: "+registry, "file://"+avroOut),
		"format: parquet", "format: avro", 1))
	if _, err := jobs.Run(ctx, aspec, jobs.Options{Workers: 2}); err != nil {
		t.Fatalf("avro output: %v", err)
	}
	if got := evoAnswersOf(t, uri, "evo_avro"); got != want {
		t.Fatalf("answers of the Avro output:\n%s\nwant\n%s", got, want)
	}
	// Compacted: hour 12 holds v3's and v4's files, compacted apart.
	al, err := jobs.Open(ctx, aspec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arep, err := al.Compact(ctx, jobs.CompactOptions{})
	al.Close()
	if err != nil || arep.FilesAfter != 4 {
		t.Fatalf("compacting the Avro output: %+v %v", arep, err)
	}
	if got := evoAnswersOf(t, uri, "evo_avro"); got != want {
		t.Fatalf("answers of the Avro output after compaction:\n%s\nwant\n%s", got, want)
	}

	// --tables: the merged columns, then each version with its columns
	// and hours.
	e, err := query.Open(ctx, uri, query.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tables, err := e.Tables(ctx)
	e.Close()
	if err != nil || len(tables) != 2 || tables[0].Name != "evo" {
		t.Fatalf("tables %+v %v", tables, err)
	}
	cols := map[string]string{}
	for _, c := range tables[0].Columns {
		cols[c.Name] = c.Type
	}
	if cols["clicks"] != "BIGINT" || cols["score"] != "DOUBLE" || cols["note"] != "VARCHAR" || cols["country"] != "VARCHAR" ||
		cols["page"] != "STRUCT(path VARCHAR, title VARCHAR)" {
		t.Fatalf("merged columns %v", tables[0].Columns)
	}
	wantParts := [][]string{{"dt=2024-05-01/hr=10"}, {"dt=2024-05-01/hr=11"}, {"dt=2024-05-01/hr=12"}, {"dt=2024-05-01/hr=12"}}
	if len(tables[0].Schemas) != 4 {
		t.Fatalf("schemas %+v", tables[0].Schemas)
	}
	for i, s := range tables[0].Schemas {
		names := map[string]string{}
		for _, c := range s.Columns {
			names[c.Name] = c.Type
		}
		_, hasNote := names["note"]
		_, hasCountry := names["country"]
		if s.Version != i+1 || s.ID != ids[i] || s.Rows != evoPer || strings.Join(s.Partitions, ",") != strings.Join(wantParts[i], ",") ||
			hasNote != (i < 2) || hasCountry != (i > 0) || (i < 3) != (names["clicks"] == "INTEGER") {
			t.Fatalf("schema %d: %+v", i+1, s)
		}
	}
	var text strings.Builder
	if err := query.WriteTables(&text, tables, query.FormatTable); err != nil ||
		!strings.Contains(text.String(), "schemas     4") || !strings.Contains(text.String(), "evo-value version 3 (id ") {
		t.Fatalf("--tables text: %v\n%s", err, text.String())
	}
	t.Logf("--tables:\n%s", text.String())

	// Compaction of the evolved output: each version's files are
	// compacted apart (never one file of two schemas) and keep their
	// writer schema; the answers and the versions --tables shows are the
	// same.
	cl2, err := jobs.Open(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crep, err := cl2.Compact(ctx, jobs.CompactOptions{})
	cl2.Close()
	if err != nil || crep.FilesAfter == 0 || crep.FilesAfter >= crep.FilesBefore {
		t.Fatalf("compaction %+v %v", crep, err)
	}
	if got := evoAnswers(t, uri); got != want {
		t.Fatalf("answers after compaction:\n%s\nwant\n%s", got, want)
	}
	e, err = query.Open(ctx, uri, query.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tables, err = e.Tables(ctx)
	e.Close()
	if err != nil || len(tables[0].Schemas) != 4 {
		t.Fatalf("after compaction (%d files before, %d after): schemas %+v %v", crep.FilesBefore, crep.FilesAfter, tables[0].Schemas, err)
	}
	for i, s := range tables[0].Schemas {
		if s.Version != i+1 || s.ID != ids[i] || s.Rows != evoPer || s.Fingerprint != fps[i+1] {
			t.Fatalf("after compaction, schema %d: %+v", i+1, s)
		}
	}
	// (exactly once: the answers' first line counts 1200 rows, 1200
	// distinct offsets; checkExactlyOnce reads manifests, not compactions)

	// A replay from within v2 reloads v2's tail, v3 and v4: the
	// same answers.
	l, err := jobs.Open(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := l.Replay(ctx, "evo/0@500")
	l.Close()
	if err != nil || rep.Run == nil || rep.Run.Totals.RowsOut != 700 {
		t.Fatalf("replay %+v %v", rep, err)
	}
	if got := evoAnswers(t, uri); got != want {
		t.Fatalf("answers after the replay:\n%s\nwant\n%s", got, want)
	}

	// An incompatible version (clicks narrowed back to int): registered
	// with the subject's check off, the next load fails naming the field,
	// before it writes anything.
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "evo-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	narrowed := strings.Replace(evoSchemas[3], `{"name":"clicks","type":"long"}`, `{"name":"clicks","type":"int"}`, 1)
	id5 := register(narrowed)
	produceAll(t, ctx, b.Addr, "evo", 0, evoRecords(t, 3, id5, 4*evoPer)) // v3's values fit the narrowed schema
	before := outputFiles(t, out)
	_, err = jobs.Run(ctx, spec, jobs.Options{})
	if !errors.Is(err, jobs.ErrSchemaChange) || !strings.Contains(err.Error(), `field "clicks" is narrowed from long to int`) ||
		!strings.Contains(err.Error(), "evo-value version 5") {
		t.Fatalf("load after an incompatible version: %v", err)
	}
	if after := outputFiles(t, out); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the refused load wrote files:\nbefore %v\nafter  %v", before, after)
	}
	if got := evoAnswers(t, uri); got != want {
		t.Fatalf("answers after the refused load:\n%s\nwant\n%s", got, want)
	}
}
