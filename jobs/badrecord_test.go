package jobs_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/jobs/query"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers/filesystem"
)

const policyJob = `
name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  max_records_per_task: %d
decode:
  format: %s
  %s
map:
  mapper: %s
  %s
on_bad_record: %s
partition:
  by: hour
  time_field: %s
output:
  uri: %s
  format: parquet
  metadata_columns: true
  max_file_records: %d
`

var policies = []string{jobs.BadRecordSkip, jobs.BadRecordDeadLetter, jobs.BadRecordFail}

// deadLetters returns the dead letters of partition 0 of topic, by offset.
func deadLetters(t *testing.T, out, topic string) map[int64]jobs.DeadLetter {
	t.Helper()
	got := map[int64]jobs.DeadLetter{}
	files, _ := filepath.Glob(filepath.Join(out, "_sluice/dead-letter", topic, "0", "*.jsonl"))
	for _, f := range files {
		for _, d := range readDeadLetters(t, f) {
			got[d.Offset] = d
		}
	}
	return got
}

// checkPolicy checks a run over a topic with bad records at the offsets
// of bad (each mapped to a text its error must hold) and good records
// elsewhere: skip counts them, dead-letter keeps them with their error,
// fail fails naming an offset and its text; with skip and dead-letter
// DuckDB reads every column of every good row.
func checkPolicy(t *testing.T, policy, out, topic string, rep *jobs.RunReport, err error, total int64, bad map[int64]string) {
	t.Helper()
	switch policy {
	case jobs.BadRecordFail:
		if !errors.Is(err, jobs.ErrBadRecord) || errors.Is(err, jobs.ErrSpec) {
			t.Fatalf("on_bad_record: fail: got %v, want a bad record (not a spec error)", err)
		}
		named := false
		for o, text := range bad {
			named = named || (strings.Contains(err.Error(), fmt.Sprintf("offset %d:", o)) && strings.Contains(err.Error(), text))
		}
		if !named {
			t.Fatalf("on_bad_record: fail: %v names no bad offset with its value", err)
		}
		return
	case jobs.BadRecordSkip:
		if err != nil || rep.Totals.Skipped != int64(len(bad)) || rep.Totals.RowsOut != total-int64(len(bad)) {
			t.Fatalf("skip: %v, totals %+v; want %d skipped", err, rep.Totals, len(bad))
		}
	case jobs.BadRecordDeadLetter:
		if err != nil || rep.Totals.DeadLettered != int64(len(bad)) || rep.Totals.RowsOut != total-int64(len(bad)) {
			t.Fatalf("dead-letter: %v, totals %+v; want %d dead letters", err, rep.Totals, len(bad))
		}
		got := deadLetters(t, out, topic)
		for o, text := range bad {
			if d, ok := got[o]; !ok || !strings.Contains(d.Error, text) {
				t.Fatalf("dead letter of offset %d: %+v, want an error with %q", o, d, text)
			}
		}
	}
	db := duck(t)
	var n int64
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT * FROM read_parquet('%s', hive_partitioning = true))`, dataGlob(out, "parquet"))
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("SELECT * over the table: %v", err)
	}
	if n != total-int64(len(bad)) {
		t.Fatalf("SELECT * gives %d rows, want %d", n, total-int64(len(bad)))
	}
	// And as `sluice query` reads it (dt a DATE, hr an INTEGER).
	e, err := query.Open(context.Background(), out, query.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rows, _, err := e.Query(context.Background(), `SELECT * FROM "`+filepath.Base(out)+`"`)
	if err != nil {
		t.Fatalf("sluice query SELECT * over the table: %v", err)
	}
	n = 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil || n != total-int64(len(bad)) {
		t.Fatalf("sluice query SELECT *: %d rows, %v; want %d", n, err, total-int64(len(bad)))
	}
	rows.Close()
	missing := map[int64]string{}
	for o := range bad {
		missing[o] = ""
	}
	checkOffsets(t, out, total-int64(len(bad)), missing)
}

// TestOutOfRangeTimeIsABadRecord: a record whose time lies outside
// partition.time_range — a time field of year 292,278,994, 1.5e20, -1, or a
// log timestamp of -1 or far in the future in the _timestamp column —
// follows on_bad_record, and the table stays readable by DuckDB.
func TestOutOfRangeTimeIsABadRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	bad := map[int64]string{
		3:  "292278994-08-17", // the largest epoch millisecond
		7:  "1.5e+20",
		11: "1969-12-31T23:59:59.999Z", // -1
		15: "the _timestamp column",    // a log time of -1
		19: "the _timestamp column",    // a log time in year 20000
		23: "10000-01-01",              // RFC 3339 can't say it; epoch millis can
	}
	far := time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)
	var recs []*kgo.Record
	for i := int64(0); i < 40; i++ {
		ts := fmt.Sprint(pageViewBase.Add(time.Duration(i) * time.Minute).UnixMilli())
		logTime := pageViewBase
		switch i {
		case 3:
			ts = "9223372036854775807"
		case 7:
			ts = "1.5e20"
		case 11:
			ts = "-1"
		case 15:
			logTime = time.UnixMilli(-1)
		case 19:
			logTime = far
		case 23:
			ts = fmt.Sprint(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
		}
		v := fmt.Sprintf(`{"ts": %s, "user_id": %d, "url": "/p/%d", "status": 200, "referrer": null, "duration_ms": 5}`, ts, i, i)
		recs = append(recs, &kgo.Record{Topic: "times", Value: []byte(v), Timestamp: logTime})
	}
	produceAll(t, ctx, b.Addr, "times", 1, recs)
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			spec, _ := writeJob(t, dir, fmt.Sprintf(policyJob, "times-"+policy, b.Addr, "times", 15, "json", "schema_file: pageview.avsc",
				"identity", "", policy, "ts", out, 0))
			rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1})
			checkPolicy(t, policy, out, "times", rep, err, 40, bad)
			if policy != jobs.BadRecordFail {
				for _, p := range rep.Partitions {
					if p.LastRecord.After(pageViewBase.Add(time.Hour)) {
						t.Fatalf("last record %s: a far-future log time became the watermark", p.LastRecord)
					}
				}
			}
		})
	}
}

// TestTimeRangeSpec: partition.time_range defaults to the years 1970
// through 9999 and refuses what is not an RFC 3339 range.
func TestTimeRangeSpec(t *testing.T) {
	base := "name: j\nsource: {topics: [t]}\ndecode: {format: json}\noutput: {uri: /tmp/x, format: jsonl}\n"
	s, err := jobs.ParseSpec([]byte(base), t.TempDir())
	if err != nil || s.Partition.TimeRange.Min != jobs.DefaultMinTime || s.Partition.TimeRange.Max != jobs.DefaultMaxTime {
		t.Fatalf("%+v %v", s, err)
	}
	for _, c := range []struct{ yaml, field string }{
		{`{min: "1970-01-01"}`, "partition.time_range.min"},
		{`{max: "tomorrow"}`, "partition.time_range.max"},
		{`{min: "2030-01-01T00:00:00Z", max: "2020-01-01T00:00:00Z"}`, "partition.time_range"},
		{`{mn: "2030-01-01T00:00:00Z"}`, "partition.time_range.mn"},
	} {
		_, err := jobs.ParseSpec([]byte(base+"partition: {time_range: "+c.yaml+"}\n"), t.TempDir())
		if !errors.Is(err, jobs.ErrSpec) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want a spec error naming %s", c.yaml, err, c.field)
		}
	}
}

// emptyItems is a schema with an array whose items take no bytes.
const emptyItems = `{"type":"record","name":"Odd","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"xs","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}]}`

// TestRegistrySchemaRefusalIsABadRecord: a record whose registry writer
// schema the loader refuses — an array of items that take no bytes, a
// field select keeps that it lacks, a union Parquet cannot hold, a field
// named like a metadata column — is a bad record naming the schema id,
// under every on_bad_record policy, on the columnar and the map path; the
// same schema as the job's schema_file is a spec error at Open.
func TestRegistrySchemaRefusalIsABadRecord(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, registry := startSluiceWithRegistry(t)
	good := registerSchema(t, ctx, registry, "schemas-good-value")
	cl, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, mapper, mapCfg, schema, want string
		value                              map[string]any
	}{
		{"items that take no bytes", "identity", "", emptyItems, "has an array of items that take no bytes",
			map[string]any{"ts": pageViewBase, "xs": []any{map[string]any{}, map[string]any{}}}},
		{"a field select keeps is missing", "select", "select: {keep: [ts, url]}",
			`{"type":"record","name":"NoURL","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`,
			`"url" is not a field of the record`, map[string]any{"ts": pageViewBase}},
		{"a union parquet cannot hold", "identity", "",
			`{"type":"record","name":"U","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"u","type":["string","long"]}]}`,
			"union", map[string]any{"ts": pageViewBase, "u": map[string]any{"long": int64(1)}}},
		{"a metadata column's name", "identity", "",
			`{"type":"record","name":"M","fields":[{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"_offset","type":"long"}]}`,
			"clashes with a metadata column", map[string]any{"ts": pageViewBase, "_offset": int64(1)}},
	}
	for ci, c := range cases {
		topic := fmt.Sprintf("schemas-%d", ci)
		ss, err := cl.CreateSchema(ctx, topic+"-odd", sr.Schema{Schema: c.schema, Type: sr.TypeAvro})
		if err != nil {
			t.Fatalf("registering %s: %v", c.name, err)
		}
		oddSchema := avro.MustParse(c.schema)
		recs, _ := pageViews(t, topic, 30, 1, time.Hour, good)
		bad := map[int64]string{}
		for _, o := range []int64{4, 17} {
			body, err := avro.Marshal(oddSchema, c.value)
			if err != nil {
				t.Fatal(err)
			}
			recs[o].Value = append(binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID)), body...)
			bad[o] = fmt.Sprintf("writer schema id %d", ss.ID)
		}
		produceAll(t, ctx, b.Addr, topic, 1, recs)
		for _, path := range []string{"columnar", "map"} {
			for _, policy := range policies {
				t.Run(c.name+"/"+path+"/"+policy, func(t *testing.T) {
					dir := t.TempDir()
					out := filepath.Join(dir, "out")
					spec, _ := writeJob(t, dir, fmt.Sprintf(policyJob, "schemas-"+policy, b.Addr, topic, 10, "avro", "registry: "+registry,
						c.mapper, c.mapCfg, policy, "ts", out, 0))
					rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1, MapPath: path == "map"})
					if policy == jobs.BadRecordDeadLetter && err == nil {
						for o, d := range deadLetters(t, out, topic) {
							if !strings.Contains(d.Error, c.want) {
								t.Fatalf("dead letter of offset %d: %q, want %q", o, d.Error, c.want)
							}
						}
					}
					checkPolicy(t, policy, out, topic, rep, err, 30, bad)
				})
			}
		}
		t.Run(c.name+"/schema_file", func(t *testing.T) {
			dir := t.TempDir()
			if err := writeFile(filepath.Join(dir, "odd.avsc"), c.schema); err != nil {
				t.Fatal(err)
			}
			// Refused when the spec is read (a select the schema file cannot
			// hold) or at the latest when the job opens, before any work.
			spec, err := jobs.LoadSpec(writeJobFile(t, dir, fmt.Sprintf(policyJob, "schemas-file", b.Addr, topic, 10, "avro", "schema_file: odd.avsc",
				c.mapper, c.mapCfg, jobs.BadRecordDeadLetter, "ts", filepath.Join(dir, "out"), 0)))
			if err == nil {
				var l *jobs.Loader
				if l, err = jobs.Open(ctx, spec, jobs.Options{}); err == nil {
					l.Close()
				}
			}
			if !errors.Is(err, jobs.ErrSpec) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open with the schema as schema_file: %v, want a spec error with %q", err, c.want)
			}
		})
	}
}

// diskFull fails every operation it is asked about, once on, with ENOSPC
// (as a full disk does).
type diskFull struct {
	on    atomic.Bool
	fired atomic.Int64
}

func (d *diskFull) MaybeError(op faults.Op, p string) error {
	if !d.on.Load() {
		return nil
	}
	d.fired.Add(1)
	return &iofs.PathError{Op: string(op), Path: p, Err: syscall.ENOSPC}
}

// TestFullDiskFailsTheSplit: an output error (ENOSPC) in any write, close
// or commit operation of a task fails the split naming the I/O, under
// every on_bad_record policy: no bad record counted, nothing committed
// (a failed move after the commit leaves the commit to recovery); with the
// fault gone, a rerun loads every record exactly once.
func TestFullDiskFailsTheSplit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	var recs []*kgo.Record
	for i := int64(0); i < 300; i++ {
		v := fmt.Sprintf(`{"ts": %d, "user_id": %d, "url": "/p/%d", "status": 200, "referrer": null, "duration_ms": 5}`,
			pageViewBase.Add(time.Duration(i)*time.Minute).UnixMilli(), i, i)
		recs = append(recs, &kgo.Record{Topic: "full", Value: []byte(v), Timestamp: pageViewBase})
	}
	counts := produceAll(t, ctx, b.Addr, "full", 1, recs)
	badRecords(t, ctx, b.Addr, "full-dl") // 100 records, 3 bad: dead letters to write
	type row struct {
		name      string
		ops       []faults.Op
		path      string
		deadLtr   bool // on the dead-letter file (the topic with bad records, dead-letter only)
		committed bool // the fault comes after the commit: it stands
	}
	rows := []row{
		{"create a data file", []faults.Op{faults.Create}, ".inprogress", false, false},
		{"write a data file", []faults.Op{faults.Write}, ".inprogress", false, false},
		{"close a data file", []faults.Op{faults.Close}, ".inprogress", false, false},
		{"make the attempt directory", []faults.Op{faults.Mkdir}, "_sluice/tmp/", false, false},
		{"write the lease", []faults.Op{faults.WriteExclusive}, "_lease-", false, false},
		{"write the commit intent", []faults.Op{faults.WriteExclusive}, "_fate", false, false},
		{"write the manifest", []faults.Op{faults.WriteExclusive}, "_sluice/commits/full/0/0", false, false},
		{"move files into place", []faults.Op{faults.Rename}, "", false, true},
		{"create the dead letters", []faults.Op{faults.Create, faults.Mkdir}, "dead-letter", true, false},
		{"write the dead letters", []faults.Op{faults.Write}, "dead-letter", true, false},
		{"close the dead letters", []faults.Op{faults.Close}, "dead-letter", true, false},
	}
	for _, r := range rows {
		for _, policy := range policies {
			if r.deadLtr && policy != jobs.BadRecordDeadLetter {
				continue // no dead letters are written
			}
			t.Run(r.name+"/"+policy, func(t *testing.T) {
				topic := "full"
				if r.deadLtr {
					topic = "full-dl"
				}
				dir := t.TempDir()
				out := filepath.Join(dir, "out")
				spec, _ := writeJob(t, dir, fmt.Sprintf(policyJob, "full-"+policy, b.Addr, topic, 150, "json", "schema_file: pageview.avsc",
					"identity", "", policy, "ts", out, 40))
				local, err := filesystem.NewLocal(out)
				if err != nil {
					t.Fatal(err)
				}
				defer local.Close()
				full := &diskFull{}
				inj := faults.Filter(full, faults.Ops(r.ops...), faults.PathContains(r.path))
				l, err := jobs.Open(ctx, spec, jobs.Options{Workers: 1, FS: vfs.NewFaulty(local, inj)})
				if err != nil {
					t.Fatal(err)
				}
				plan, err := l.Plan(ctx)
				if err != nil {
					t.Fatal(err)
				}
				full.on.Store(true)
				var failed error
				for _, s := range plan.Splits {
					rep, err := l.RunTask(ctx, s)
					// A dead-letter file that fails to close held its letters: the
					// task counted them, and commits none.
					if rep.Skipped != 0 || (rep.DeadLettered != 0 && r.name != "close the dead letters") {
						t.Fatalf("%s: %d skipped, %d dead-lettered: an output error counted as bad records (%v)", s, rep.Skipped, rep.DeadLettered, err)
					}
					if err != nil {
						failed = err
						break
					}
				}
				full.on.Store(false)
				l.Close()
				if full.fired.Load() == 0 {
					t.Fatal("the fault was never reached")
				}
				if failed == nil || !strings.Contains(failed.Error(), "no space left on device") || errors.Is(failed, jobs.ErrBadRecord) {
					t.Fatalf("got %v, want the split to fail naming the I/O error, not a bad record", failed)
				}
				if m, _ := filepath.Glob(filepath.Join(out, "_sluice/commits", topic, "0", "*.json")); len(m) != 0 && !r.committed {
					t.Fatalf("commits after an output error: %v", m)
				}
				rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 1})
				if err != nil || rep.Totals.Skipped != 0 {
					t.Fatalf("rerun: %v, totals %+v", err, rep.Totals)
				}
				if r.deadLtr {
					checkOffsets(t, out, 97, badOffsets)
					if rep.Totals.DeadLettered != 3 {
						t.Fatalf("rerun: %d dead letters, want 3", rep.Totals.DeadLettered)
					}
					return
				}
				checkExactlyOnce(t, out, topic, counts, true)
			})
		}
	}
}

// readDeadLetters reads one dead-letter file.
func readDeadLetters(t *testing.T, file string) []jobs.DeadLetter {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []jobs.DeadLetter
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var d jobs.DeadLetter
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func writeFile(p, text string) error { return os.WriteFile(p, []byte(text), 0o644) }
