package jobs_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The worked custom-mapper example (testdata/mapper-example) builds into
// its own loader binary, and its mapper's rows are what the README says.
func TestCustomMapperExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := kafka.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pageviews-loader")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", append(args, "./testdata/mapper-example")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the example: %v\n%s", err, out)
	}
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "enrich", 2000, 2, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "enrich", 2, recs)
	s, _ := pageViewSchema(t)
	var kept, errors int
	for _, r := range recs {
		var v map[string]any
		if err := avro.Unmarshal(s, r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if st := v["status"].(int); st < 300 || st >= 400 {
			kept++
			if st >= 500 {
				errors++
			}
		}
	}
	out := filepath.Join(dir, "out")
	job := fmt.Sprintf(pageViewJob, "enrich", b.Addr, "enrich", 600, "schema_file: pageview.avsc", out)
	job = strings.Replace(job, "on_bad_record: fail", "map:\n  mapper: enrich\n  options: {error_from: 500}\non_bad_record: fail", 1)
	jobPath := writeJobFile(t, dir, job) // "enrich" is registered in the example binary only
	run := exec.CommandContext(ctx, bin, "load", "run", jobPath, "--quiet")
	if b, err := run.CombinedOutput(); err != nil {
		t.Fatalf("pageviews-loader load run: %v\n%s", err, b)
	}
	var rows, errRows, redirects, badSection int
	q := fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE is_error), count(*) FILTER (WHERE status BETWEEN 300 AND 399),
		count(*) FILTER (WHERE section <> coalesce(nullif(split_part(split_part(url, '?', 1), '/', 2), ''), 'home'))
		FROM read_parquet('%s')`, dataGlob(out, "parquet"))
	if err := duck(t).QueryRow(q).Scan(&rows, &errRows, &redirects, &badSection); err != nil {
		t.Fatal(err)
	}
	if rows != kept || errRows != errors || redirects != 0 || badSection != 0 {
		t.Fatalf("rows %d (want %d), errors %d (want %d), redirects %d, wrong sections %d", rows, kept, errRows, errors, redirects, badSection)
	}
	if _, err := os.Stat(filepath.Join(out, "_sluice", "runs")); err != nil {
		t.Fatal(err)
	}
}
