package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver
	"github.com/sluicehq/sluice/internal/vfs"
)

// Options tune an Engine; zero values are the defaults.
type Options struct {
	// FS replaces the file system named by the warehouse URI (tests pass
	// instrumented ones). The caller closes it.
	FS vfs.FS
	// CacheDir holds the local copies of HDFS files (default
	// DefaultCacheDir()).
	CacheDir string
	// CacheBytes bounds the local cache (default 4 GiB). A query whose
	// files do not fit fails with ErrData.
	CacheBytes int64
	// Threads is DuckDB's thread count (default: DuckDB's, one per core).
	Threads int
	// MemoryBytes is DuckDB's memory_limit: its buffer pool, which holds a
	// query's result (result.go) and spills beyond it under CacheDir
	// (default: DuckDB's, 80% of the machine's memory).
	MemoryBytes int64
	// Warnings receives notes such as torn manifests (default: discard).
	Warnings io.Writer
	// TimeZone is the session time zone of DuckDB, in which TIMESTAMP WITH
	// TIME ZONE values are truncated, extracted and printed (an IANA name;
	// default UTC, the loader's default partition zone).
	TimeZone string
}

// Engine runs SQL over the datasets of one warehouse with an embedded
// DuckDB. It is not safe for concurrent use.
type Engine struct {
	wh    *Warehouse
	db    *sql.DB
	conn  *sql.Conn
	opts  Options
	cache *Cache
	loc   *time.Location
	seq   int
	made  []string // temporary tables and views of the previous query
	// noPrune reads every file (tests compare results with and without).
	noPrune bool
}

// Open opens the warehouse at uri and an in-memory DuckDB confined to it:
// a query reads the warehouse's tables and files and nothing else
// (sandbox.go).
func Open(ctx context.Context, uri string, opts Options) (*Engine, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 4 << 30
	}
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir()
	}
	// DuckDB may read under the cache (sandbox.go): name it absolutely, as
	// the paths handed to DuckDB are.
	cacheDir, err := filepath.Abs(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("query: cache directory %q: %v", opts.CacheDir, err)
	}
	opts.CacheDir = cacheDir
	if opts.Warnings == nil {
		opts.Warnings = io.Discard
	}
	if opts.TimeZone == "" {
		opts.TimeZone = "UTC"
	}
	wh, err := OpenWarehouse(uri, opts.FS)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		wh.Close()
		return nil, fmt.Errorf("query: starting DuckDB: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		wh.Close()
		return nil, fmt.Errorf("query: starting DuckDB: %w", err)
	}
	loc, err := time.LoadLocation(opts.TimeZone)
	if err != nil {
		conn.Close()
		db.Close()
		wh.Close()
		return nil, fmt.Errorf("query: time zone %q: %v", opts.TimeZone, err)
	}
	e := &Engine{wh: wh, db: db, conn: conn, opts: opts, loc: loc}
	// Large sorts, joins and Avro tables spill next to the cache, not into
	// the working directory.
	spill := filepath.Join(opts.CacheDir, "spill")
	if _, err := conn.ExecContext(ctx, "SET temp_directory = "+quoteString(spill)); err != nil {
		e.Close()
		return nil, fmt.Errorf("query: DuckDB temp_directory: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "SET TimeZone = "+quoteString(opts.TimeZone)); err != nil {
		e.Close()
		return nil, fmt.Errorf("query: time zone %q: %s", opts.TimeZone, oneLine(err.Error()))
	}
	if opts.Threads > 0 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET threads = %d", opts.Threads)); err != nil {
			e.Close()
			return nil, fmt.Errorf("query: DuckDB threads: %w", err)
		}
	}
	if opts.MemoryBytes > 0 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET memory_limit = '%dB'", opts.MemoryBytes)); err != nil {
			e.Close()
			return nil, fmt.Errorf("query: DuckDB memory_limit: %s", oneLine(err.Error()))
		}
	}
	allowed := []string{opts.CacheDir}
	if ip, ok := wh.fs.(InPlace); ok {
		allowed = append(allowed, ip.LocalRoot())
	}
	if err := confine(ctx, conn, allowed); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close releases DuckDB and the warehouse.
func (e *Engine) Close() error {
	return errors.Join(e.conn.Close(), e.db.Close(), e.wh.Close())
}

// Location returns the engine's time zone (Options.TimeZone), for Output.
func (e *Engine) Location() *time.Location { return e.loc }

// Warehouse returns the engine's warehouse.
func (e *Engine) Warehouse() *Warehouse { return e.wh }

// Plan is what a query reads: per referenced dataset, the files kept by
// partition pruning.
type Plan struct {
	Tables []TablePlan
}

// TablePlan is one dataset's part of a Plan.
type TablePlan struct {
	Name       string
	Files      []DataFile // the files the query reads
	TotalFiles int        // the dataset's committed files
	// SchemaFrom is the file whose schema (only) is read when no file
	// matches, so that the table still has its columns.
	SchemaFrom *DataFile
	// SchemaAlso holds one file of each writer schema that no file of
	// Files has (the query reads their columns only), so that a pruned
	// query's table has the merged columns of every schema.
	SchemaAlso []DataFile
	Pruned     bool // a dt/hr filter narrowed the files
}

// FileURIs returns every file of the plan as a URI, in order.
func (p *Plan) FileURIs(wh *Warehouse) []string {
	var out []string
	for _, t := range p.Tables {
		for _, f := range t.Files {
			out = append(out, wh.FileURI(f.Path))
		}
	}
	return out
}

// FileURI returns the URI of a path relative to the warehouse root.
func (w *Warehouse) FileURI(p string) string {
	return strings.TrimRight(w.uri, "/") + "/" + p
}

// Plan parses query and decides which files of which datasets it reads.
func (e *Engine) Plan(ctx context.Context, query string) (*Plan, error) {
	pq, err := parse(ctx, e.conn, query)
	if err != nil {
		return nil, err
	}
	return e.plan(ctx, pq)
}

func (e *Engine) plan(ctx context.Context, pq *parsedQuery) (*Plan, error) {
	byName := map[string][]tableRef{}
	var names []string
	for _, r := range pq.refs {
		n, ok := e.wh.lookup(r.name)
		if !ok {
			continue // a CTE, or an unknown table: DuckDB tells
		}
		if _, seen := byName[n]; !seen {
			names = append(names, n)
		}
		byName[n] = append(byName[n], r)
	}
	sort.Strings(names)
	p := &Plan{}
	for _, n := range names {
		d, err := e.wh.Dataset(n)
		if err != nil {
			return nil, err
		}
		if d.Torn > 0 {
			fmt.Fprintf(e.opts.Warnings, "sluice query: %s: %d manifest(s) not readable (an attempt committing now, or a dead one): their files are left out; `sluice load run` recovers them\n", n, d.Torn)
		}
		if len(d.Files) == 0 {
			return nil, fmt.Errorf("%w: table %s has no committed files yet (%s)", ErrData, n, e.wh.FileURI(d.Dir))
		}
		tp, err := e.prune(ctx, d, byName[n])
		if err != nil {
			return nil, err
		}
		p.Tables = append(p.Tables, tp)
	}
	return p, nil
}

// prune keeps the files of d that some reference needs.
func (e *Engine) prune(ctx context.Context, d *Dataset, refs []tableRef) (TablePlan, error) {
	tp := TablePlan{Name: d.Name, TotalFiles: len(d.Files)}
	dirs := map[string][]KeyValue{}
	keySet := map[string]bool{}
	var keys []string
	for _, f := range d.Files {
		dirs[f.PartitionDir()] = f.Partition
		for _, kv := range f.Partition {
			if !keySet[kv.Key] {
				keySet[kv.Key] = true
				keys = append(keys, kv.Key)
			}
		}
	}
	keep := map[string]bool{}
	all := false
	table := ""
	for _, r := range refs {
		if len(r.conjuncts) == 0 || len(keys) == 0 || e.noPrune {
			all = true
			break
		}
		if table == "" {
			e.seq++
			table = fmt.Sprintf("__sluice_parts_%d", e.seq)
			e.made = append(e.made, "TABLE "+quoteIdent(table))
			if err := partitionTable(ctx, e.conn, table, keys, dirs); err != nil {
				return tp, fmt.Errorf("query: partition table of %s: %w", d.Name, err)
			}
		}
		m, ok := matchingDirs(ctx, e.conn, table, r)
		if !ok {
			all = true
			break
		}
		for dir := range m {
			keep[dir] = true
		}
	}
	for _, f := range d.Files {
		if all || keep[f.PartitionDir()] {
			tp.Files = append(tp.Files, f)
		}
	}
	tp.Pruned = len(tp.Files) < len(d.Files)
	if len(tp.Files) == 0 {
		last := d.Files[len(d.Files)-1]
		tp.SchemaFrom = &last
	}
	if tp.Pruned {
		tp.SchemaAlso = missingSchemas(d.Files, tp.Files, tp.SchemaFrom)
	}
	return tp, nil
}

// Query runs query and returns its rows (the caller closes them, before
// the engine's next call) and what it read. The rows are read a page at a
// time (result.go): memory stays bounded whatever the result size.
//
// A compaction that commits while the query runs removes the files it
// replaced: a query that fails with one of its files gone reads the
// manifests and compaction records again and runs once more, backing off,
// for up to vanishWait, so it answers over the old files or the new ones.
func (e *Engine) Query(ctx context.Context, query string) (*Rows, *Plan, error) {
	deadline := time.Now().Add(vanishWait)
	wait := 10 * time.Millisecond
	prev := ""
	for {
		rows, p, err := e.query(ctx, query)
		if err == nil || p == nil || !e.vanished(p, err) || time.Now().After(deadline) {
			return rows, p, err
		}
		// Re-run only while the commits change the files planned: a file
		// deleted outside sluice stays planned and fails at once.
		if files := planFiles(p); files == prev {
			return rows, p, err
		} else {
			prev = files
		}
		e.wh.datasets = map[string]*Dataset{} // read the commits again
		select {
		case <-ctx.Done():
			return nil, p, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// planFiles lists the files p reads, in order: what a re-run compares.
func planFiles(p *Plan) string {
	var b strings.Builder
	for _, t := range p.Tables {
		for _, f := range t.Files {
			b.WriteString(f.Path)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// vanishWait bounds how long a query whose files a compaction keeps
// replacing under it goes on re-running. A compaction commits each
// partition-hour's rewrite on its own and removes the files it replaced at
// once, so over many partition-hours nearly every run of a long query meets
// a commit (a fixed three, then 32, re-runs ran out within the compaction:
// TestCompactKill9WhileQuerying); the backoff lets a run land between two
// commits or after the last. Each re-run needs a file that really vanished.
const vanishWait = 5 * time.Minute

// vanished reports whether a file of p was not at its final path when the
// query failed with qerr: a compaction replaced it since the plan was made, or the
// file was read from its temporary path while its commit moved it.
func (e *Engine) vanished(p *Plan, qerr error) bool {
	msg := qerr.Error()
	for _, t := range p.Tables {
		files := append(append([]DataFile(nil), t.Files...), t.SchemaAlso...)
		if t.SchemaFrom != nil {
			files = append(files, *t.SchemaFrom)
		}
		for _, f := range files {
			// Not at its final path: gone, or read from its temporary
			// path while its commit moved it (then it is final now).
			if fin, err := vfs.Exists(e.wh.fs, f.Path); err == nil && !fin {
				return true
			}
			// Read from its temporary path, which its commit has since
			// moved: the error names that path.
			if f.Temp != "" && strings.Contains(msg, path.Base(f.Temp)) {
				return true
			}
		}
	}
	return false
}

func (e *Engine) query(ctx context.Context, query string) (*Rows, *Plan, error) {
	if err := e.dropPrevious(ctx); err != nil {
		return nil, nil, err
	}
	pq, err := parse(ctx, e.conn, query)
	if err != nil {
		return nil, nil, err
	}
	p, err := e.plan(ctx, pq)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range p.Tables {
		if err := e.register(ctx, t); err != nil {
			return nil, p, err
		}
	}
	rows, err := e.run(ctx, query)
	if err != nil {
		return nil, p, err
	}
	return rows, p, nil
}

func (e *Engine) dropPrevious(ctx context.Context) error {
	for i := len(e.made) - 1; i >= 0; i-- {
		kind, name, _ := strings.Cut(e.made[i], " ")
		if _, err := e.conn.ExecContext(ctx, "DROP "+kind+" IF EXISTS "+name); err != nil {
			return fmt.Errorf("query: dropping %s: %w", e.made[i], err)
		}
	}
	e.made = nil
	return nil
}

var missingTable = regexp.MustCompile(`Table with name ([^ ]+) does not exist`)

// sqlError turns a DuckDB error into one line wrapping ErrSQL, or
// ErrUnknownTable with the tables there are, or ErrOutsideWarehouse.
func (e *Engine) sqlError(err error) error {
	msg := err.Error()
	if out, ok := e.outsideError(msg); ok {
		return out
	}
	if m := missingTable.FindStringSubmatch(msg); m != nil {
		if strings.ContainsAny(m[1], "/\\") {
			// FROM 'path' or FROM 'http://…': a file DuckDB did not
			// read (the sandbox turns replacement scans of paths off).
			return e.outside(fmt.Sprintf("not %q", m[1]))
		}
		return fmt.Errorf("%w %s in %s (tables: %s)", ErrUnknownTable, m[1], e.wh.uri, strings.Join(e.wh.names, ", "))
	}
	return fmt.Errorf("%w: %s", ErrSQL, oneLine(msg))
}

// resolved is a data file located for reading.
type resolved struct {
	DataFile
	src   string // path read in the warehouse FS: final, or temporary
	info  vfs.FileInfo
	local string // local path DuckDB reads (Parquet, JSON)
}

// resolve finds each file where it is (its final path, or its temporary
// one while the commit rolls forward) by listing its directory once.
func (e *Engine) resolve(files []DataFile) ([]resolved, error) {
	listed := map[string]map[string]vfs.FileInfo{}
	out := make([]resolved, 0, len(files))
	for _, f := range files {
		dir := path.Dir(f.Path)
		ents, ok := listed[dir]
		if !ok {
			ents = map[string]vfs.FileInfo{}
			l, err := e.wh.fs.List(dir)
			if err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return nil, fmt.Errorf("%w: listing %s: %v", ErrData, e.wh.FileURI(dir), err)
			}
			for _, fi := range l {
				ents[fi.Name] = fi
			}
			listed[dir] = ents
		}
		r := resolved{DataFile: f, src: f.Path}
		if fi, ok := ents[path.Base(f.Path)]; ok {
			r.info = fi
		} else {
			fi, err := e.wh.fs.Stat(f.Temp)
			if err != nil {
				return nil, fmt.Errorf("%w: committed file %s is missing (and not at its temporary path %s): was it deleted outside sluice?",
					ErrData, e.wh.FileURI(f.Path), f.Temp)
			}
			r.src, r.info = f.Temp, fi
		}
		out = append(out, r)
	}
	return out, nil
}

// localize gives each Parquet or JSON file a local path: in place on a
// local warehouse, else a copy in the bounded cache.
func (e *Engine) localize(files []resolved) error {
	if ip, ok := e.wh.fs.(InPlace); ok {
		for i := range files {
			if files[i].Format == "avro" {
				continue
			}
			p, err := ip.LocalPath(files[i].src)
			if err == nil {
				p, err = filepath.Abs(p)
			}
			if err != nil {
				return fmt.Errorf("%w: %v", ErrData, err)
			}
			files[i].local = p
		}
		return nil
	}
	var need int64
	for _, f := range files {
		if f.Format != "avro" {
			need += f.info.Size
		}
	}
	if need > e.opts.CacheBytes {
		return fmt.Errorf("%w: the query reads %s of HDFS files, more than the local cache holds (%s): filter on dt/hr, or raise --cache-size",
			ErrData, byteSize(need), byteSize(e.opts.CacheBytes))
	}
	if _, err := e.localCache(); err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for range 4 { // a few copies at once: the DataNodes serve them in parallel
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f := &files[i]
				rel := path.Join(f.PartitionDir(), path.Base(f.Path))
				p, _, err := e.cache.Stage(e.wh.fs, f.src, rel, f.info)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				f.local = p
				mu.Unlock()
			}
		}()
	}
	for i := range files {
		if files[i].Format != "avro" {
			next <- i
		}
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var keep []string
	for _, f := range files {
		if f.local != "" {
			keep = append(keep, f.local)
		}
	}
	return e.cache.Trim(keep)
}

// localCache opens the cache on first use.
func (e *Engine) localCache() (*Cache, error) {
	if e.cache == nil {
		c, err := NewCache(e.opts.CacheDir, e.opts.CacheBytes)
		if err != nil {
			return nil, err
		}
		e.cache = c
	}
	return e.cache, nil
}

func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
