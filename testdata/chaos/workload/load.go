package workload

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2" // the DuckDB driver that reads the warehouse back

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// LoadConfig configures a load job of a topic of string values.
type LoadConfig struct {
	Name      string
	Bootstrap []string
	Topic     string
	// Warehouse is the local output directory.
	Warehouse string
	// Format is jsonl (default) or parquet.
	Format string
	// MaxRecordsPerTask bounds one split (default 1000).
	MaxRecordsPerTask int
}

func (c LoadConfig) format() string {
	if c.Format == "" {
		return "jsonl"
	}
	return c.Format
}

// LoadSpec writes the job spec of c into dir and parses it: string values,
// no time partitions, metadata columns on (so each row names its
// partition and offset).
func LoadSpec(dir string, c LoadConfig) (*jobs.Spec, error) {
	if c.MaxRecordsPerTask <= 0 {
		c.MaxRecordsPerTask = 1000
	}
	y := fmt.Sprintf(`name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: %d
decode:
  format: string
partition:
  by: none
output:
  uri: file://%s
  format: %s
  metadata_columns: true
`, c.Name, strings.Join(c.Bootstrap, ", "), c.Topic, c.MaxRecordsPerTask, c.Warehouse, c.format())
	path := filepath.Join(dir, c.Name+".yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		return nil, fmt.Errorf("workload: load spec: %w", err)
	}
	return jobs.LoadSpec(path)
}

// RunLoad runs the job once (jobs.Run) and records it as a load.
func RunLoad(ctx context.Context, rec *history.Recorder, process int, spec *jobs.Spec, opts jobs.Options) (*jobs.RunReport, error) {
	inv := rec.Invoke(process, history.Load)
	rep, err := jobs.Run(ctx, spec, opts)
	op := history.Op{Outcome: history.OK}
	if err != nil {
		op.Outcome, op.Error = history.Unknown, err.Error()
	}
	inv.Complete(op)
	return rep, err
}

// ReadWarehouse reads back what the warehouse holds of topic and records a
// load-read: Records are the rows of every data file at a final path
// (outside _sluice/, ending in .jsonl or .parquet), read with DuckDB as an
// outside reader (Hive, Spark) sees them, not through the manifests; Ranges
// are the [start, end) the partition's manifests commit. partitions lists
// the partitions whose manifests are read. want, when not empty, are the
// ranges the caller waited for the loads to commit (a final read's): the
// checker then reports what of them no load committed (load-incomplete),
// so a run that loaded nothing cannot pass; nil for a read that claims no
// progress.
func ReadWarehouse(ctx context.Context, rec *history.Recorder, process int, warehouse, topic string, partitions []int32, want []history.Range) (history.Op, error) {
	inv := rec.Invoke(process, history.LoadRead)
	fail := func(err error) (history.Op, error) {
		err = fmt.Errorf("workload: read warehouse %s: %w", warehouse, err)
		return inv.Complete(history.Op{Outcome: history.Fail, Error: err.Error()}), err
	}
	ranges, err := committedRanges(warehouse, topic, partitions)
	if err != nil {
		return fail(err)
	}
	recs, err := readFiles(ctx, warehouse)
	if err != nil {
		return fail(err)
	}
	return inv.Complete(history.Op{Outcome: history.OK, Records: recs, Ranges: ranges, Want: want}), nil
}

// committedRanges reads the manifests: one Range per manifest.
func committedRanges(warehouse, topic string, partitions []int32) ([]history.Range, error) {
	fsys, err := filesystem.Open("file://" + warehouse)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	store := writers.NewStore(fsys, writers.StoreOptions{})
	var out []history.Range
	for _, p := range partitions {
		ms, err := store.Commits(topic, p)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out = append(out, history.Range{Topic: topic, Partition: p, Start: m.Start, End: m.End})
		}
	}
	return out, nil
}

// readFiles reads (_topic, _partition, _offset, value) of every data file
// at a final path.
func readFiles(ctx context.Context, warehouse string) ([]history.Record, error) {
	var jsonl, parquet []string
	err := filepath.WalkDir(warehouse, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "_sluice":
			return filepath.SkipDir
		case strings.HasSuffix(p, ".jsonl"):
			jsonl = append(jsonl, p)
		case strings.HasSuffix(p, ".parquet"):
			parquet = append(parquet, p)
		}
		return nil
	})
	if err != nil || len(jsonl)+len(parquet) == 0 {
		return nil, err
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var parts []string
	if len(jsonl) > 0 {
		parts = append(parts, fmt.Sprintf(`SELECT _topic, _partition, _offset, value FROM read_json(%s, format='newline_delimited', columns={_topic:'VARCHAR', _partition:'INTEGER', _offset:'BIGINT', value:'VARCHAR'})`, sqlList(jsonl)))
	}
	if len(parquet) > 0 {
		parts = append(parts, fmt.Sprintf(`SELECT _topic, _partition, _offset, value FROM read_parquet(%s)`, sqlList(parquet)))
	}
	rows, err := db.QueryContext(ctx, strings.Join(parts, " UNION ALL ")+" ORDER BY 2, 3")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []history.Record
	for rows.Next() {
		var r history.Record
		var v sql.NullString
		if err := rows.Scan(&r.Topic, &r.Partition, &r.Offset, &v); err != nil {
			return nil, err
		}
		r.Value = v.String
		out = append(out, r)
	}
	return out, rows.Err()
}

// sqlList renders paths as a DuckDB list of string literals.
func sqlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}
