// Package writers turns the records of a split (topic, partition, [start,
// end)) into Parquet, Avro or JSON-lines files on a local directory or HDFS,
// and commits them atomically so that a retried, duplicated or crashed task
// never duplicates or loses a record.
//
// Subpackages: filesystem (the FS interface: local, HDFS, fault-injecting)
// and format (the file formats and the Avro → Arrow schema mapping).
//
// # Output layout
//
//	<output root>/
//	├── dt=2024-05-01/hr=13/                       Hive-style time partitions
//	│   ├── pageviews+0+1000+1500.parquet            <topic>+<partition>+<first>+<end>.<ext>
//	│   └── pageviews+1+880+1270.parquet             ([first, end) offsets held by the file)
//	└── _sluice/
//	    ├── commits/<topic>/<partition>/
//	    │   └── 00000000000000001000.json            manifest: THE commit of split start 1000
//	    ├── tmp/<topic>/<partition>/<start %020d>/<attempt id>/
//	    │   └── dt=2024-05-01/hr=13/<name>.inprogress  an attempt's files before commit
//	    ├── withdrawn/<topic>/<partition>/<from>-<time>/   replayed-away files + manifests
//	    └── torn/<topic>/<partition>/                 partial manifests of dead writers
//
// # Manifest (version 1, JSON; frozen fields, new ones only added)
//
//	{"version":1, "topic":"pageviews", "partition":0, "start":1000, "end":1500,
//	 "attempt":"20240501T140003Z-9f2c…", "committed":"2024-05-01T14:00:09Z",
//	 "records":500, "files":[{"temp":"_sluice/tmp/…", "final":"dt=…/pageviews+0+1000+1500.parquet",
//	 "records":500, "bytes":81234, "first_offset":1000, "last_offset":1499}],
//	 "checksum":"<CRC-32C hex of the manifest with checksum empty>"}
//
// # Commit protocol
//
//	attempt ── write files under _sluice/tmp/…/<attempt>/ ── close (durable)
//	   │
//	   ▼
//	create _sluice/commits/<t>/<p>/<start>.json exclusively ──── exists? ──► lost:
//	   │  (local: temp + fsync + link; HDFS: create overwrite=false)        delete own tmp
//	   ▼  ◄── the commit point
//	move each file tmp → final (rename, never replacing; idempotent)
//	   │
//	   ▼
//	delete the attempt directory
//
// Recovery (Store.Recover) lists only _sluice/tmp/<t>/<p>/ and reads the
// manifests of the starts found there: it rolls forward the winner's moves,
// deletes losers' and never-committed attempts (after StaleAfter), and moves
// a torn manifest (a dead HDFS writer's partial file, after TornGrace) aside.
// Withdraw (replay) moves a commit's files and manifest under
// _sluice/withdrawn/, never deleting.
//
// # Invariants
//
//  1. At most one manifest exists per (topic, partition, start); its
//     existence (whole, checksum valid) is the commit of exactly its files.
//  2. A file appears under a final path only after its manifest exists, and
//     only the manifest's attempt (or recovery acting for it) moves it there;
//     so a final path holds a complete, committed file or nothing.
//  3. Temporaries are unique per attempt, so roll-forward can be repeated or
//     run twice at once: a move either happens once or finds its work done.
//  4. Each record offset of a split is in exactly one file of its manifest;
//     the next split of the partition starts at the newest manifest's end.
//  5. Nothing committed is deleted: withdrawal and torn manifests are moved.
//
// Assumptions: a live attempt never stalls longer than StaleAfter (or, while
// writing its manifest, TornGrace); only one Withdraw of a partition runs at
// once and no attempt of it commits meanwhile (the scheduler's job lock).
//
// # Concurrency
//
// A Store is safe for concurrent use by attempts of different or equal
// splits (exclusivity comes from the file system); a SplitWriter is used by
// one goroutine. The package holds no locks across file-system calls.
//
// # Example
//
//	fs, _ := filesystem.Open("hdfs://127.0.0.1:9000/warehouse/pageviews")
//	store := writers.NewStore(fs, writers.StoreOptions{})
//	store.Recover("pageviews", 0)
//	start, _ := store.NextStart("pageviews", 0, 0)
//	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
//	w, _ := writers.NewSplitWriter(store, writers.Split{Topic: "pageviews", Partition: 0, Start: start, End: hw},
//		writers.Config{Format: format.Options{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true},
//			Partitioner: part, MaxRecords: 1_000_000})
//	for _, r := range records { w.Write(schema, r.Value, format.Meta{Offset: r.Offset, Timestamp: r.Time}) }
//	res, err := w.Commit() // res.Won: ours; !res.Won: another attempt already committed this split
package writers
