package jobs_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The same topic loaded from Apache Kafka 4.1 and from a sluice broker
// gives the same rows.
func TestLoadFromKafkaAndSluiceAgree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := kafka.SharedKafka(t)
	s := kafka.StartSluice(t)
	recs, _ := pageViews(t, "same", 20_000, 4, 2*time.Hour, -1)
	counts := produceAll(t, ctx, k.Addr, "same", 4, recs)
	for _, r := range recs {
		r.Offset = 0
	}
	produceAll(t, ctx, s.Addr, "same", 4, recs)
	dir := t.TempDir()
	var outs []string
	for _, src := range []struct{ name, addr string }{{"kafka", k.Addr}, {"sluice", s.Addr}} {
		out := filepath.Join(dir, src.name)
		spec, _ := writeJob(t, t.TempDir(), fmt.Sprintf(pageViewJob, "same-"+src.name, src.addr, "same", 3000, "schema_file: pageview.avsc", out))
		rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2})
		if err != nil {
			t.Fatalf("%s: %v", src.name, err)
		}
		if rep.Totals.RowsOut != 20_000 {
			t.Fatalf("%s: %+v", src.name, rep.Totals)
		}
		checkExactlyOnce(t, out, "same", counts, true)
		outs = append(outs, out)
	}
	db := duck(t)
	for i := range outs {
		var diff int
		q := fmt.Sprintf(`SELECT count(*) FROM (SELECT * FROM read_parquet('%s') EXCEPT ALL SELECT * FROM read_parquet('%s'))`,
			dataGlob(outs[i], "parquet"), dataGlob(outs[1-i], "parquet"))
		if err := db.QueryRow(q).Scan(&diff); err != nil {
			t.Fatal(err)
		}
		if diff != 0 {
			t.Fatalf("%d rows of %s are not in %s", diff, outs[i], outs[1-i])
		}
	}
}
