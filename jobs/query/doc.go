// Package query runs SQL over the files the loader committed to a
// warehouse, with an embedded DuckDB (github.com/duckdb/duckdb-go/v2).
//
// # Warehouse layout (the writers' output, see package writers)
//
//	<warehouse>/                                  file:///dir or hdfs://host:port/dir
//	├── pageviews/                                a dataset: a directory holding _sluice/
//	│   ├── dt=2024-05-01/hr=13/                  Hive partitions → columns dt DATE, hr INTEGER
//	│   │   └── pageviews+0+1000+1500.parquet     .parquet | .avro | .jsonl[.gz|.zst]
//	│   └── _sluice/commits/<topic>/<partition>/<start>.json   the manifests: THE list of files
//	└── clicks/ …                                 → table "clicks"
//
// The files of a dataset are those its manifests commit (writers.Store.Commits),
// with its compaction records applied (writers.Store.CommittedFiles: the
// manifests are read first, then the records), never a listing: an attempt still writing, debris and withdrawn output are
// not read. A committed file not yet moved to its final path is read from its
// temporary path.
//
// # A query
//
//	SQL ──► DuckDB json_serialize_sql ──► base-table references + their WHERE
//	        (syntax errors, non-SELECT)      conjuncts on dt/hr (prune.go)
//	                                              │ evaluated by DuckDB over a table
//	                                              ▼ of the dataset's partition dirs
//	        manifests ──► files of the kept partitions (the Plan; --explain prints it)
//	                                              │
//	  Parquet / JSON: local path, or a copy in ◄──┤──► Avro: hamba/avro decode ──► Arrow
//	  the bounded cache (HDFS, stage.go)          │    batches (avrocodec.RecordBuilder) ──►
//	  ──► read_parquet / read_json views          │    duckdb-go Arrow view ──► temp table
//	                                              ▼
//	        CREATE TEMP VIEW "<dataset>" AS <one SELECT per format> UNION ALL BY NAME …
//	                                              │
//	                                              ▼
//	        CREATE TEMP TABLE "__sluice_result_N" AS <the query>   (DuckDB's buffer pool)
//	                                              │ read back in pages of 16,384 rows (result.go)
//	                                              ▼
//	        rows written one by one as table / CSV / JSON (output.go)
//
// Pruning is conservative: a conjunct prunes a table reference only when
// every column it uses is a partition key of that reference, the table is
// the SELECT's only one or sits in inner joins, and the conjunct holds no
// subquery or volatile function. A dataset referenced several times reads
// the union of what each reference needs.
//
// The Arrow handoff needs duckdb-go's duckdb_arrow build tag (make build and
// make test set it). Built without it, Avro files are written as Parquet
// into the cache from the same Arrow batches and read from there.
//
// # What a query may read
//
// The warehouse's tables, and its files by path (read_parquet of a file
// under a local warehouse), nothing else: Open sets DuckDB's
// enable_external_access off with allowed_directories the local warehouse
// and the cache, turns extension autoloading off and locks the
// configuration before any SQL of the user runs (sandbox.go). A path or URL
// outside, or an extension, fails with ErrOutsideWarehouse.
//
// # The local cache (HDFS)
//
// Entries are keyed by file system, path, size and modification time, made
// under tmp/ and renamed into place, and evicted least recently used first
// beyond the size limit, never while the running query uses them. A query
// needing more than the limit fails with ErrData.
//
// # Concurrency
//
// An Engine holds one DuckDB connection and is used by one goroutine; the
// staging of HDFS files runs four copies at once. Two processes may share a
// cache directory: entries appear atomically; eviction by one while the
// other reads an entry is not guarded against.
//
// # Example
//
//	e, _ := query.Open(ctx, "hdfs://127.0.0.1:9000/warehouse", query.Options{})
//	defer e.Close()
//	rows, plan, err := e.Query(ctx, "SELECT hr, count(*) FROM pageviews WHERE dt = '2024-05-01' GROUP BY hr")
//	query.Write(os.Stdout, rows, query.Output{Format: query.FormatTable, Location: e.Location()})
package query
