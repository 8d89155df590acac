package jobs_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

const jsonJob = `
name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  max_records_per_task: %d
  on_offset_out_of_range: %s
decode:
  format: json
  schema_file: pageview.avsc
on_bad_record: %s
partition:
  by: hour
  time_field: ts
output:
  uri: %s
  format: parquet
  metadata_columns: true
`

// badOffsets are the records of badRecords that cannot be loaded.
var badOffsets = map[int64]string{10: "not json", 55: `{"ts": "yesterday", "user_id": 1, "url": "/", "status": 200, "duration_ms": 1}`, 70: `[1, 2]`}

// badRecords produces 100 JSON page views, three of them bad.
func badRecords(t *testing.T, ctx context.Context, addr, topic string) {
	var recs []*kgo.Record
	for i := int64(0); i < 100; i++ {
		v, bad := badOffsets[i]
		if !bad {
			v = fmt.Sprintf(`{"ts": %d, "user_id": %d, "url": "/p/%d", "status": 200, "referrer": null, "duration_ms": 5}`,
				pageViewBase.Add(time.Duration(i)*time.Minute).UnixMilli(), i, i)
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v), Timestamp: pageViewBase})
	}
	produceAll(t, ctx, addr, topic, 1, recs)
}

func TestBadRecordPolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	badRecords(t, ctx, b.Addr, "bad")
	run := func(t *testing.T, policy string) (*jobs.RunReport, string, error) {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		spec, _ := writeJob(t, dir, fmt.Sprintf(jsonJob, "bad-"+policy, b.Addr, "bad", 30, "fail", policy, out))
		rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 3})
		return rep, out, err
	}
	t.Run("fail", func(t *testing.T) {
		rep, out, err := run(t, "fail")
		// The first bad record met fails the run (splits run in parallel:
		// any of them may be first).
		if !errors.Is(err, jobs.ErrBadRecord) || !(strings.Contains(err.Error(), "offset 10") ||
			strings.Contains(err.Error(), "offset 55") || strings.Contains(err.Error(), "offset 70")) {
			t.Fatalf("got %v", err)
		}
		if rep.Status != "failed" {
			t.Fatalf("status %s", rep.Status)
		}
		// Nothing of the failing task (nor of the later ones) committed.
		if m, _ := filepath.Glob(filepath.Join(out, "_sluice/commits/bad/0/*.json")); len(m) != 0 {
			t.Fatalf("commits after a failed first task: %v", m)
		}
		if m, _ := filepath.Glob(filepath.Join(out, "dt=*/hr=*/*")); len(m) != 0 {
			t.Fatalf("visible files: %v", m)
		}
		// The report is stored, with the failure.
		if m, _ := filepath.Glob(filepath.Join(out, "_sluice/runs/*.json")); len(m) != 1 {
			t.Fatalf("run reports: %v", m)
		}
	})
	t.Run("skip", func(t *testing.T) {
		rep, out, err := run(t, "skip")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.Skipped != 3 || rep.Totals.RowsOut != 97 || rep.Totals.RecordsIn != 100 {
			t.Fatalf("totals %+v", rep.Totals)
		}
		checkOffsets(t, out, 97, badOffsets)
	})
	t.Run("dead-letter", func(t *testing.T) {
		rep, out, err := run(t, "dead-letter")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.DeadLettered != 3 || rep.Totals.RowsOut != 97 {
			t.Fatalf("totals %+v", rep.Totals)
		}
		checkOffsets(t, out, 97, badOffsets)
		files, _ := filepath.Glob(filepath.Join(out, "_sluice/dead-letter/bad/0/*.jsonl"))
		seen := map[int64]bool{}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				var d jobs.DeadLetter
				if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
					t.Fatal(err)
				}
				raw, _ := base64.StdEncoding.DecodeString(d.Value)
				if string(raw) != badOffsets[d.Offset] || d.Error == "" || seen[d.Offset] {
					t.Fatalf("dead letter %+v (raw %q)", d, raw)
				}
				seen[d.Offset] = true
			}
			fh.Close()
		}
		if len(seen) != 3 {
			t.Fatalf("dead letters for %v, want %v", seen, badOffsets)
		}
	})
}

// checkOffsets checks a 1-partition warehouse holds rows offsets [0, 100)
// minus missing, once each.
func checkOffsets(t *testing.T, out string, rows int64, missing map[int64]string) {
	t.Helper()
	db := duck(t)
	var n, distinct int64
	var bad int
	glob := dataGlob(out, "parquet")
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*), count(DISTINCT _offset) FROM read_parquet('%s')`, glob)).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	list := []string{"-1"}
	for o := range missing {
		list = append(list, fmt.Sprint(o))
	}
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s') WHERE _offset IN (%s)`, glob, strings.Join(list, ","))).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if n != rows || distinct != rows || bad != 0 {
		t.Fatalf("%d rows, %d distinct offsets, %d bad offsets loaded; want %d", n, distinct, bad, rows)
	}
}

// A checkpoint below the log start (records deleted before loading): fail
// stops the plan; skip goes on from the log start and reports the loss.
func TestOutOfRangePolicies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := kafka.SharedKafka(t)
	for _, policy := range []string{"fail", "skip"} {
		t.Run(policy, func(t *testing.T) {
			topic := "oor-" + policy
			recs, _ := pageViews(t, topic, 100, 1, time.Hour, -1)
			produceAll(t, ctx, k.Addr, topic, 1, recs)
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "oor-"+policy, k.Addr, topic, 40, "schema_file: pageview.avsc", out))
			spec.Source.OnOffsetOutOfRange = policy
			if _, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil {
				t.Fatal(err)
			}
			more, _ := pageViews(t, topic, 100, 1, time.Hour, -1)
			produceAll(t, ctx, k.Addr, topic, 0, more)
			cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			o := kadm.Offsets{}
			o.Add(kadm.Offset{Topic: topic, Partition: 0, At: 150})
			if _, err := kadm.NewClient(cl).DeleteRecords(ctx, o); err != nil {
				t.Fatal(err)
			}
			rep, err := jobs.Run(ctx, spec, jobs.Options{})
			if policy == "fail" {
				if !errors.Is(err, inputformat.ErrOutOfRange) || !strings.Contains(err.Error(), "[100, 150)") {
					t.Fatalf("got %v", err)
				}
				checkOffsets(t, out, 100, nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lost := rep.Partitions[0].LostToRetention
			if lost == nil || *lost != (inputformat.Range{Start: 100, End: 150}) || rep.Totals.RowsOut != 50 {
				t.Fatalf("lost %v, totals %+v", lost, rep.Totals)
			}
			gap := map[int64]string{}
			for o := int64(100); o < 150; o++ {
				gap[o] = ""
			}
			checkOffsets(t, out, 150, gap)
		})
	}
}

// start: latest is decided once, at the first plan: records produced
// between the first and the second run are loaded, none before.
func TestStartLatest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	first, _ := pageViews(t, "latest", 50, 1, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "latest", 1, first)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "latest", b.Addr, "latest", 100, "schema_file: pageview.avsc", out))
	spec.Source.Start = jobs.StartLatest
	rep, err := jobs.Run(ctx, spec, jobs.Options{})
	if err != nil || rep.Totals.RecordsIn != 0 || !rep.Plan[0].Origin || rep.Plan[0].Start != 50 {
		t.Fatalf("first run: %+v %+v %v", rep.Plan, rep.Totals, err)
	}
	more, _ := pageViews(t, "latest", 30, 1, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "latest", 0, more)
	rep, err = jobs.Run(ctx, spec, jobs.Options{})
	if err != nil || rep.Totals.RowsOut != 30 || rep.Partitions[0].From != 50 || rep.Partitions[0].To != 80 {
		t.Fatalf("second run: %+v %+v %v", rep.Partitions, rep.Totals, err)
	}
}
