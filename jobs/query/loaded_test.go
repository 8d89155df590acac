// Queries over warehouses loaded by `sluice load run` (jobs/jobcli) from a real
// sluice broker, local and HDFS.

package query

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/jobs/jobcli"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

const loadJob = `name: %s
source:
  bootstrap: [%s]
  topics: [pageviews]
  start: earliest
  max_records_per_task: 3000
decode:
  format: avro
  schema_file: %s
partition:
  by: hour
  time_field: ts
output:
  uri: %s
  format: %s
  metadata_columns: true
`

// TestLoadedBySluiceLoadRun: page views produced to a sluice broker and
// loaded by `sluice load run` into a local warehouse (Parquet, Avro, JSON
// lines) and an HDFS one (Parquet, Avro): the counts per hour are those
// produced, each (partition, offset) once, and a query of one hour opens
// only that hour's files, as many as --explain lists.
func TestLoadedBySluiceLoadRun(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	schema := pageViewSchema(t)
	schemaFile := filepath.Join(t.TempDir(), "pageview.avsc")
	if err := os.WriteFile(schemaFile, []byte(fixtures.WritersPageView()), 0o644); err != nil {
		t.Fatal(err)
	}

	// 12,000 records over 4 hours (10:00 to 13:59) on 3 partitions.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "pageviews"); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	hours := map[string]int64{}
	var recs []*kgo.Record
	for i := int64(0); i < 12_000; i++ {
		ts := day.Add(10*time.Hour + time.Duration(i)*1200*time.Millisecond).Truncate(time.Millisecond)
		v, err := avro.Marshal(schema, pageView(i, ts))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "pageviews", Partition: int32(i % 3), Value: v, Timestamp: ts})
		hours[fmt.Sprint(ts.Hour())]++
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	load := func(t *testing.T, dir, name, uri, kind string) {
		job := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(job, []byte(fmt.Sprintf(loadJob, name, b.Addr, schemaFile, uri, kind)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := jobcli.LoadCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs([]string{"run", "--quiet", job})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("sluice load run %s: %v\n%s", name, err, out.String())
		}
	}
	for _, where := range []string{"local", "hdfs"} {
		t.Run(where, func(t *testing.T) {
			var w warehouse
			if where == "local" {
				w = localWarehouse(t)
			} else {
				w = hdfsWarehouse(t)
			}
			dir := t.TempDir()
			kinds := []string{"parquet", "avro", "jsonl"}
			if where == "hdfs" {
				kinds = kinds[:2]
			}
			for _, kind := range kinds {
				load(t, dir, "pv-"+kind, w.uri+"/pv_"+kind, kind)
			}
			e := w.open(t)
			for _, kind := range kinds {
				table := "pv_" + kind
				got := queryRows(t, e, "SELECT hr, count(*), count(DISTINCT (_partition, _offset)) FROM "+table+" GROUP BY hr ORDER BY hr")
				if len(got) != len(hours) {
					t.Fatalf("%s: hours %v, produced %v", table, got, hours)
				}
				for _, r := range got {
					if want := fmt.Sprint(hours[r[0]]); r[1] != want || r[2] != want {
						t.Errorf("%s hour %s: %s rows, %s distinct offsets; produced %s", table, r[0], r[1], r[2], want)
					}
				}
				q := "SELECT count(*) FROM " + table + " WHERE dt = '2024-05-01' AND hr = 12"
				p, err := e.Plan(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				fresh := w.open(t)
				w.counter.reset()
				if got := queryRows(t, fresh, q); got[0][0] != fmt.Sprint(hours["12"]) {
					t.Errorf("%s: %s, produced %d", q, got[0][0], hours["12"])
				}
				opened := w.counter.dataOpens()
				if len(opened) == 0 || len(opened) != len(p.Tables[0].Files) {
					t.Errorf("%s: opened %d files, explain lists %d", q, len(opened), len(p.Tables[0].Files))
				}
				for _, f := range opened {
					if !strings.Contains(f, "/dt=2024-05-01/hr=12/") {
						t.Errorf("%s opened %s, outside hour 12", q, f)
					}
				}
			}
		})
	}
}
