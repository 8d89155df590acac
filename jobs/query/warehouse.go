package query

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// Errors of the package. Each is wrapped with what was wrong and where.
var (
	// ErrWarehouse reports a warehouse URI that cannot be opened: a bad URI,
	// a missing directory, an unreachable HDFS.
	ErrWarehouse = errors.New("query: warehouse")
	// ErrUnknownTable reports a table that names no dataset.
	ErrUnknownTable = errors.New("query: unknown table")
	// ErrSQL reports a query DuckDB refused (syntax, binding, types).
	ErrSQL = errors.New("query: SQL")
	// ErrData reports committed files that cannot be read: missing, of an
	// unknown format, or too large for the local cache.
	ErrData = errors.New("query: data")
	// ErrOutsideWarehouse reports a query that reaches for something other
	// than the warehouse: a file outside it or the cache, a URL, an
	// extension. sluice query reads the warehouse's tables and files only.
	ErrOutsideWarehouse = errors.New("query: outside the warehouse")
)

// InPlace is implemented by file systems whose files DuckDB can read where
// they lie (a local directory). Files of other file systems (HDFS) are
// staged to the local cache first.
type InPlace interface {
	// LocalPath returns the local path of name, relative to the root.
	LocalPath(name string) (string, error)
	// LocalRoot returns the absolute local directory of the root: DuckDB
	// may read under it (and under the cache), nowhere else.
	LocalRoot() string
}

// localInPlace is the local file system with LocalPath.
type localInPlace struct{ *filesystem.Local }

func (l localInPlace) LocalPath(name string) (string, error) {
	c, err := vfs.Clean(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.Root(), filepath.FromSlash(c)), nil
}

func (l localInPlace) LocalRoot() string { return l.Root() }

// Warehouse is a directory of datasets, each the output of one job.
type Warehouse struct {
	uri      string
	fs       vfs.FS // rooted at the warehouse
	closer   io.Closer
	names    []string          // dataset names, sorted
	dirs     map[string]string // name → directory relative to the root
	datasets map[string]*Dataset
}

// Dataset is one job's output: its committed data files, from its manifests.
type Dataset struct {
	Name  string
	Dir   string // relative to the warehouse root; "" when the root is the dataset
	Files []DataFile
	// Torn counts manifests that could not be read (an attempt still
	// writing its manifest, or a dead one): their files are not committed.
	Torn int
}

// DataFile is one committed data file.
type DataFile struct {
	// Path is relative to the warehouse root: the file's final path, or its
	// temporary path when the commit is not rolled forward yet.
	Path string
	// Temp is where the committing attempt wrote the file: it is read from
	// there when the commit's roll-forward has not moved it yet.
	Temp        string
	Format      string // parquet, avro or json
	Compression string // json only: gzip, zstd or ""
	// Partition holds the Hive key=value directories of the path, in order.
	Partition []KeyValue
	Records   int64
	Bytes     int64
	Topic     string
	Part      int32
	First     int64
	Last      int64
	// Schema names the file's writer schema and column fingerprint (nil
	// in manifests written before they did).
	Schema *writers.FileSchema
}

// KeyValue is one Hive partition directory, key=value.
type KeyValue struct{ Key, Value string }

// PartitionDir returns "k1=v1/k2=v2" ("" for none).
func (f DataFile) PartitionDir() string {
	parts := make([]string, len(f.Partition))
	for i, kv := range f.Partition {
		parts[i] = kv.Key + "=" + kv.Value
	}
	return strings.Join(parts, "/")
}

// OpenWarehouse opens the warehouse at uri (file:///dir, /dir or
// hdfs://host:port/dir). fs, when not nil, is used instead of opening uri
// (tests pass instrumented file systems); the caller closes it.
func OpenWarehouse(uri string, fs vfs.FS) (*Warehouse, error) {
	w := &Warehouse{uri: uri, fs: fs}
	if fs == nil {
		var err error
		if w.fs, w.closer, err = openURI(uri); err != nil {
			return nil, err
		}
	} else if l, ok := fs.(*filesystem.Local); ok {
		w.fs = localInPlace{l}
	}
	if err := w.discover(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func openURI(uri string) (vfs.FS, io.Closer, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %q is not a URI: %v", ErrWarehouse, uri, err)
	}
	switch u.Scheme {
	case "", "file":
		dir := uri
		if u.Scheme == "file" {
			if u.Host != "" && u.Host != "localhost" {
				return nil, nil, fmt.Errorf("%w: %q: a file URI has no host (file:///abs/path)", ErrWarehouse, uri)
			}
			dir = u.Path
		}
		st, err := os.Stat(dir)
		if err != nil || !st.IsDir() {
			return nil, nil, fmt.Errorf("%w: %s is not a directory: give the directory that holds the jobs' outputs", ErrWarehouse, uri)
		}
		l, err := filesystem.NewLocal(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrWarehouse, err)
		}
		return localInPlace{l}, l, nil
	case "hdfs":
		// Connect at the HDFS root so that a missing warehouse is reported,
		// not created.
		h, err := connectHDFS(u.Host)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: cannot reach HDFS for %s: %v", ErrWarehouse, uri, err)
		}
		rel := strings.Trim(path.Clean("/"+u.Path), "/")
		if rel != "" {
			st, err := h.Stat(rel)
			if err != nil || !st.IsDir {
				h.Close()
				if err == nil || errors.Is(err, vfs.ErrNotExist) {
					return nil, nil, fmt.Errorf("%w: %s is not a directory on HDFS", ErrWarehouse, uri)
				}
				return nil, nil, fmt.Errorf("%w: cannot reach HDFS for %s: %v", ErrWarehouse, uri, err)
			}
		}
		return sub(h, rel), h, nil
	default:
		return nil, nil, fmt.Errorf("%w: %q: scheme %q is not file or hdfs", ErrWarehouse, uri, u.Scheme)
	}
}

// hdfsConnectTimeout bounds the wait for a NameNode that does not answer
// (a host that drops packets would otherwise hold the command for the
// kernel's TCP timeout).
var hdfsConnectTimeout = 30 * time.Second

func connectHDFS(addr string) (*filesystem.HDFS, error) {
	type result struct {
		h   *filesystem.HDFS
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := filesystem.NewHDFS(addr, "/", filesystem.HDFSOptions{})
		done <- result{h, err}
	}()
	select {
	case r := <-done:
		return r.h, r.err
	case <-time.After(hdfsConnectTimeout):
		go func() { // close the connection if it ever comes up
			if r := <-done; r.h != nil {
				r.h.Close()
			}
		}()
		return nil, fmt.Errorf("no answer from the NameNode at %s after %s", addr, hdfsConnectTimeout)
	}
}

// Close releases the warehouse's connections.
func (w *Warehouse) Close() error {
	if w.closer != nil {
		return w.closer.Close()
	}
	return nil
}

// URI returns the warehouse URI as given.
func (w *Warehouse) URI() string { return w.uri }

// Names returns the dataset names, sorted.
func (w *Warehouse) Names() []string { return w.names }

// discover finds the datasets: the directories under the root that hold a
// _sluice directory (or the root itself when it holds one).
func (w *Warehouse) discover() error {
	w.dirs = map[string]string{}
	w.datasets = map[string]*Dataset{}
	ents, err := w.fs.List(".")
	if err != nil {
		return fmt.Errorf("%w: listing %s: %v", ErrWarehouse, w.uri, err)
	}
	for _, e := range ents {
		if e.IsDir && e.Name == writers.SluiceDir {
			name := path.Base(strings.TrimRight(w.fs.String(), "/"))
			w.dirs[name] = ""
			w.names = []string{name}
			return nil
		}
	}
	for _, e := range ents {
		if !e.IsDir || strings.HasPrefix(e.Name, "_") || strings.HasPrefix(e.Name, ".") {
			continue
		}
		ok, err := vfs.Exists(w.fs, path.Join(e.Name, writers.SluiceDir))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrWarehouse, e.Name, err)
		}
		if ok {
			w.dirs[e.Name] = e.Name
			w.names = append(w.names, e.Name)
		}
	}
	sort.Strings(w.names)
	return nil
}

// lookup finds a dataset by name, case-insensitively as SQL names are.
func (w *Warehouse) lookup(name string) (string, bool) {
	if _, ok := w.dirs[name]; ok {
		return name, true
	}
	for _, n := range w.names {
		if strings.EqualFold(n, name) {
			return n, true
		}
	}
	return "", false
}

// Dataset returns the dataset name with its committed files, reading its
// manifests on first use.
func (w *Warehouse) Dataset(name string) (*Dataset, error) {
	n, ok := w.lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q in %s (tables: %s)", ErrUnknownTable, name, w.uri, strings.Join(w.names, ", "))
	}
	if d := w.datasets[n]; d != nil {
		return d, nil
	}
	d, err := w.load(n, w.dirs[n])
	if err != nil {
		return nil, err
	}
	w.datasets[n] = d
	return d, nil
}

// load reads a dataset's manifests (writers.Store.Commits of every topic
// partition under _sluice/commits): the committed files, never a listing
// of the data directories, so in-progress and withdrawn files are not read.
func (w *Warehouse) load(name, dir string) (*Dataset, error) {
	dfs := sub(w.fs, dir)
	store := writers.NewStore(dfs, writers.StoreOptions{})
	d := &Dataset{Name: name, Dir: dir}
	commits := path.Join(writers.SluiceDir, "commits")
	topics, err := dfs.List(commits)
	if errors.Is(err, vfs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: listing manifests: %v", ErrData, name, err)
	}
	for _, t := range topics {
		if !t.IsDir {
			continue
		}
		parts, err := dfs.List(path.Join(commits, t.Name))
		if err != nil {
			return nil, fmt.Errorf("%w: dataset %s: listing manifests: %v", ErrData, name, err)
		}
		for _, p := range parts {
			var part int32
			if _, err := fmt.Sscanf(p.Name, "%d", &part); err != nil || !p.IsDir {
				continue
			}
			ms, err := store.Commits(t.Name, part)
			if err != nil && !errors.Is(err, writers.ErrTornManifest) {
				return nil, fmt.Errorf("%w: dataset %s: manifests of %s/%d: %v", ErrData, name, t.Name, part, err)
			}
			if err != nil {
				d.Torn++
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					d.Torn = d.Torn - 1 + len(j.Unwrap())
				}
			}
			// The manifests first, then the compaction records over them:
			// a rewrite committed in between shows as its new files.
			files, err := store.CommittedFiles(t.Name, part, ms)
			if err != nil {
				return nil, fmt.Errorf("%w: dataset %s: compactions of %s/%d: %v", ErrData, name, t.Name, part, err)
			}
			for _, f := range files {
				df, err := dataFile(dir, t.Name, part, f.File)
				if err != nil {
					return nil, fmt.Errorf("%w: dataset %s: %v", ErrData, name, err)
				}
				d.Files = append(d.Files, df)
			}
		}
	}
	sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Path < d.Files[j].Path })
	return d, nil
}

func dataFile(dir, topic string, partition int32, f writers.File) (DataFile, error) {
	df := DataFile{Path: path.Join(dir, f.Final), Temp: path.Join(dir, f.Temp), Records: f.Records, Bytes: f.Bytes,
		Topic: topic, Part: partition, First: f.First, Last: f.Last, Schema: f.Schema}
	base := path.Base(f.Final)
	switch {
	case strings.HasSuffix(base, ".parquet"):
		df.Format = "parquet"
	case strings.HasSuffix(base, ".avro"):
		df.Format = "avro"
	case strings.HasSuffix(base, ".jsonl"):
		df.Format = "json"
	case strings.HasSuffix(base, ".jsonl.gz"):
		df.Format, df.Compression = "json", "gzip"
	case strings.HasSuffix(base, ".jsonl.zst"):
		df.Format, df.Compression = "json", "zstd"
	default:
		return df, fmt.Errorf("file %s of %s/%d has no known format extension (.parquet, .avro, .jsonl[.gz|.zst])",
			f.Final, topic, partition)
	}
	for _, seg := range strings.Split(path.Dir(f.Final), "/") {
		if k, v, ok := strings.Cut(seg, "="); ok && k != "" {
			df.Partition = append(df.Partition, KeyValue{k, v})
		}
	}
	return df, nil
}
