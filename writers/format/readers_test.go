package format_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
)

// pyResult is what testdata/writers/read.py prints.
type pyResult struct {
	Rows    int               `json:"rows"`
	Types   map[string]string `json:"types"`
	Logical map[string]string `json:"logical"`
	Codec   string            `json:"codec"`
	Records []map[string]any  `json:"records"`
}

// readPython reads files with pyarrow (parquet) or fastavro (avro).
func readPython(t *testing.T, kind string, files ...string) pyResult {
	t.Helper()
	root, err := hdfs.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("python3", "-c", "import pyarrow, fastavro").CombinedOutput(); err != nil {
		t.Fatalf("python3 with pyarrow and fastavro is missing: run `make deps` (target deps-python): %v\n%s", err, out)
	}
	args := append([]string{filepath.Join(root, "testdata", "writers", "read.py"), kind}, files...)
	cmd := exec.Command("python3", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read.py %s: %v\n%s", kind, err, stderr.String())
	}
	var r pyResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("read.py output: %v\n%s", err, out)
	}
	return r
}

// duck opens an embedded DuckDB.
func duck(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// duckTypes returns column name → DuckDB type of a query's result.
func duckTypes(t *testing.T, db *sql.DB, from string) map[string]string {
	t.Helper()
	rows, err := db.Query("DESCRIBE SELECT * FROM " + from)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := map[string]string{}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out[vals[0].(string)] = vals[1].(string)
	}
	return out
}

func mustExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}
