package query

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/writers/format"
)

// secret is the content of the files outside the warehouse: no answer or
// error may carry it.
const secret = "sluice-secret-4242"

// sandboxFixture is a local warehouse with one Parquet dataset, and beside
// it (a sibling directory whose name extends the warehouse's, so that a
// prefix check would let it through) files a query must not read, and an
// HTTP server counting the requests it gets.
type sandboxFixture struct {
	e        *Engine
	root     string // the warehouse's local directory
	inside   string // a committed Parquet file of the warehouse
	outside  string // the sibling directory
	text     string // outside/secret.json: JSON, CSV and text
	parquet  string // outside/copy.parquet: a copy of inside
	url      string // the HTTP server
	requests *atomic.Int64
	total    int64 // the dataset's rows
}

func newSandboxFixture(t *testing.T) *sandboxFixture {
	t.Helper()
	w := localWarehouse(t)
	p := loadDataset(t, w.dataset(t, "pageviews"), "pageviews", "pageviews", format.Parquet, "zstd", 3)
	f := &sandboxFixture{root: w.counter.local, total: p.total, requests: new(atomic.Int64)}
	for _, files := range p.files {
		f.inside = filepath.Join(f.root, filepath.FromSlash(files[0]))
		break
	}
	f.outside = f.root + "-outside"
	if err := os.Mkdir(f.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	f.text = filepath.Join(f.outside, "secret.json")
	if err := os.WriteFile(f.text, []byte(`{"secret": "`+secret+`"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.inside)
	if err != nil {
		t.Fatal(err)
	}
	f.parquet = filepath.Join(f.outside, "copy.parquet")
	if err := os.WriteFile(f.parquet, b, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		rw.Write([]byte(`{"secret": "` + secret + `"}`))
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.e = w.open(t)
	return f
}

// TestQueryReadsOnlyTheWarehouse: every DuckDB table function, path form
// and statement that touches files, the network or extensions fails with
// an error saying sluice query reads only the warehouse, and reads
// nothing; the warehouse's tables and files still answer.
func TestQueryReadsOnlyTheWarehouse(t *testing.T) {
	f := newSandboxFixture(t)
	ctx := context.Background()
	rel, err := filepath.Rel(f.root, f.text)
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	wd, _ := os.Getwd()
	fromWD, _ := filepath.Rel(wd, f.text)
	// {placeholder} → a path of the fixture.
	expand := func(q string) string {
		return strings.NewReplacer("{text}", f.text, "{parquet}", f.parquet, "{outside}", f.outside,
			"{escape}", f.root+string(filepath.Separator)+rel, "{root}", f.root, "{url}", f.url, "{home}", home,
			"{relative}", fromWD).Replace(q)
	}
	outside := []string{
		// Every table function that reads a file.
		"SELECT * FROM read_text('{text}')",
		"SELECT * FROM read_blob('{text}')",
		"SELECT * FROM glob('{outside}/*')",
		"SELECT * FROM read_csv('{text}')",
		"SELECT * FROM read_csv_auto('{text}')",
		"SELECT * FROM sniff_csv('{text}')",
		"SELECT * FROM read_json('{text}')",
		"SELECT * FROM read_json_auto('{text}')",
		"SELECT * FROM read_ndjson('{text}')",
		"SELECT * FROM read_ndjson_auto('{text}')",
		"SELECT * FROM read_json_objects('{text}')",
		"SELECT * FROM read_ndjson_objects('{text}')",
		"SELECT * FROM read_json_objects_auto('{text}')",
		"SELECT * FROM read_parquet('{parquet}')",
		"SELECT * FROM parquet_scan('{parquet}')",
		"SELECT * FROM parquet_metadata('{parquet}')",
		"SELECT * FROM parquet_schema('{parquet}')",
		"SELECT * FROM parquet_file_metadata('{parquet}')",
		"SELECT * FROM parquet_kv_metadata('{parquet}')",
		"SELECT * FROM parquet_bloom_probe('{parquet}', 'status', 200)",
		"SELECT * FROM read_duckdb('{parquet}')",
		"SELECT * FROM query('SELECT * FROM read_text(''{text}'')')",
		"SELECT count(*) FROM pageviews WHERE status IN (SELECT length(content) FROM read_text('{text}'))",
		// Every way of writing a path outside.
		"SELECT * FROM read_text('file://{text}')",
		"SELECT * FROM read_text('{escape}')",
		"SELECT * FROM read_text('{relative}')",
		"SELECT * FROM read_text('~/.bashrc')",
		"SELECT * FROM read_text('{home}/.bashrc')",
		"SELECT * FROM read_text('/etc/passwd')",
		"SELECT * FROM read_blob('/etc/shadow')",
		"SELECT * FROM glob('/etc/*')",
		"SELECT * FROM read_csv(['{root}/../" + filepath.Base(f.outside) + "/secret.json'])",
		"SELECT * FROM '{text}'",
		"SELECT * FROM '{parquet}'",
		// The network.
		"SELECT * FROM read_text('{url}/x.txt')",
		"SELECT * FROM read_json('{url}/x.json')",
		"SELECT * FROM read_csv('{url}/x.csv')",
		"SELECT * FROM read_parquet('{url}/x.parquet')",
		"SELECT * FROM '{url}/x.parquet'",
		"SELECT * FROM read_parquet('s3://bucket/x.parquet')",
		"SELECT * FROM read_parquet('hf://datasets/x/y.parquet')",
		// Extensions (would be installed from the network and loaded).
		"SELECT * FROM read_xlsx('{text}')",
		"SELECT * FROM iceberg_scan('{outside}')",
		"SELECT * FROM delta_scan('{outside}')",
		"SELECT * FROM sqlite_scan('{text}', 't')",
		"SELECT st_point(1, 2)",
		"SELECT * FROM duckdb_secrets()",
	}
	for _, q := range outside {
		q := expand(q)
		t.Run(q, func(t *testing.T) {
			rows, _, err := f.e.Query(ctx, q)
			if rows != nil {
				rows.Close() // the query ran: the test fails below
			}
			t.Log(err)
			if !errors.Is(err, ErrOutsideWarehouse) || !strings.Contains(err.Error(), "sluice query reads only the warehouse") ||
				strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), secret) {
				t.Errorf("got %v, want ErrOutsideWarehouse saying sluice query reads only the warehouse, on one line, without the file's content", err)
			}
		})
	}
	// Statements: only a single SELECT is run.
	copied := filepath.Join(f.outside, "copied.csv")
	statements := []string{
		"COPY (SELECT 1) TO '" + copied + "'",
		"COPY pageviews TO '" + copied + "'",
		"COPY pageviews FROM '{text}'",
		"ATTACH '{outside}/x.db' AS x",
		"DETACH x",
		"INSTALL httpfs",
		"LOAD httpfs",
		"FORCE INSTALL httpfs FROM '{url}'",
		"EXPORT DATABASE '{outside}/export'",
		"IMPORT DATABASE '{outside}'",
		"SET enable_external_access = true",
		"RESET enable_external_access",
		"SET lock_configuration = false",
		"PRAGMA enable_external_access",
		"CALL pragma_version()",
		"CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')",
		"SET enable_external_access = true; SELECT * FROM read_text('{text}')",
		"SELECT 1; COPY (SELECT 1) TO '" + copied + "'",
		".import {text} t",
		"SELECT getenv('HOME')",
	}
	for _, q := range statements {
		q := expand(q)
		t.Run(q, func(t *testing.T) {
			rows, _, err := f.e.Query(ctx, q)
			if rows != nil {
				rows.Close() // the query ran: the test fails below
			}
			t.Log(err)
			if !errors.Is(err, ErrSQL) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), secret) {
				t.Errorf("got %v, want ErrSQL on one line", err)
			}
		})
	}
	if _, err := os.Stat(copied); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("COPY TO wrote %s (stat: %v)", copied, err)
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("the HTTP server was asked %d times, want never", n)
	}

	// The warehouse still answers: its tables, and its files by path.
	if got := queryRows(t, f.e, "SELECT count(*) FROM pageviews"); got[0][0] != fmt.Sprint(f.total) {
		t.Errorf("count(*): %v, want %d", got, f.total)
	}
	if got := queryRows(t, f.e, "SELECT count(*) > 0 FROM read_parquet('"+f.inside+"')"); got[0][0] != "true" {
		t.Errorf("read_parquet of a warehouse file: %v", got)
	}
	if got := queryRows(t, f.e, "SELECT count(*) > 0 FROM glob('"+f.root+"/*/*/*/*')"); got[0][0] != "true" {
		t.Errorf("glob inside the warehouse: %v", got)
	}
	if got := queryRows(t, f.e, "SELECT count(*) FROM pageviews WHERE hr = 10 OR dt IS NULL"); len(got) != 1 {
		t.Errorf("after the refusals: %v", got)
	}
}

// TestSandboxHoldsOnTheConnection: the DuckDB connection itself refuses
// what parse would never let through (writes, attaches, extensions) and
// keeps its settings against SET and RESET, so the sandbox does not rest
// on the SELECT-only check.
func TestSandboxHoldsOnTheConnection(t *testing.T) {
	f := newSandboxFixture(t)
	ctx := context.Background()
	written := filepath.Join(f.outside, "written.csv")
	refused := []string{
		"COPY (SELECT 1) TO '" + written + "'",
		"COPY (SELECT 1) TO '" + f.url + "/x.csv'",
		"CREATE TEMP TABLE t AS SELECT * FROM read_text('" + f.text + "')",
		"ATTACH '" + filepath.Join(f.outside, "x.db") + "' AS x",
		"INSTALL httpfs",
		"LOAD httpfs",
		"LOAD '" + f.text + "'",
		"EXPORT DATABASE '" + filepath.Join(f.outside, "export") + "'",
		"IMPORT DATABASE '" + f.outside + "'",
	}
	for _, s := range []string{"enable_external_access = true", "allowed_directories = ['/']", "allowed_paths = ['/etc/passwd']",
		"autoinstall_known_extensions = true", "autoload_known_extensions = true", "allow_community_extensions = true",
		"allow_unsigned_extensions = true", "temp_directory = '/tmp'", "lock_configuration = false"} {
		refused = append(refused, "SET "+s, "SET GLOBAL "+s, "RESET "+strings.Fields(s)[0])
	}
	for _, s := range refused {
		_, err := f.e.conn.ExecContext(ctx, s)
		if err == nil {
			t.Errorf("%s: ran on the engine's DuckDB connection", s)
		}
		t.Logf("%s: %s", s, oneLine(fmt.Sprint(err)))
	}
	if _, err := os.Stat(written); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("COPY TO wrote %s (stat: %v)", written, err)
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("the HTTP server was asked %d times, want never", n)
	}
	var external, locked bool
	var allowed string
	if err := f.e.conn.QueryRowContext(ctx, "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'), current_setting('allowed_directories')::VARCHAR").Scan(&external, &locked, &allowed); err != nil {
		t.Fatal(err)
	}
	if external || !locked || strings.Contains(allowed, f.outside) || !strings.Contains(allowed, f.root) {
		t.Errorf("settings after the attempts: enable_external_access=%v lock_configuration=%v allowed_directories=%s", external, locked, allowed)
	}
}
