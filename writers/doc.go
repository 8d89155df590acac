// Package writers turns the records of a split (topic, partition, [start,
// end)) into Parquet, Avro or JSON-lines files on a local directory or HDFS,
// and commits them atomically so that a retried, duplicated or crashed task
// never duplicates or loses a record.
//
// Storage is internal/vfs's FS (local, HDFS, in-memory, fault-injecting),
// opened from an output URI by the subpackage filesystem; the subpackage
// format holds the file formats and the Avro → Arrow schema mapping.
//
// # Output layout
//
//	<output root>/
//	├── dt=2024-05-01/hr=13/                       Hive-style time partitions
//	│   ├── pageviews+0+1000+1500.parquet            <topic>+<partition>+<first>+<end>.<ext>
//	│   ├── pageviews+1+880+1270.parquet             ([first, end) offsets held by the file)
//	│   └── pageviews+1+0+310+i1.parquet             a topic the loader started over once (Config.Incarnation)
//	└── _sluice/
//	    ├── commits/<topic>/<partition>/
//	    │   ├── origin                               the start of the partition's first split
//	    │   └── 00000000000000001000.json            manifest: THE commit of split start 1000
//	    ├── tmp/<topic>/<partition>/<start %020d>/<attempt id>/
//	    │   ├── _lease-<expiry, Unix ms %020d>       the attempt's lease (a new file per renewal)
//	    │   ├── _fate                                created once: commit intent or reaped mark
//	    │   └── dt=2024-05-01/hr=13/<name>.inprogress  an attempt's files before commit
//	    ├── withdrawn/<topic>/<partition>/<from>-<time>[.unfinished]/   replayed-away files + manifests
//	    └── torn/<topic>/<partition>/                 partial manifests of dead writers
//
// # Manifest and origin format (envelope version 2)
//
// A manifest is one header line and a JSON body. The header is frozen in
// its first two words (magic, version); the rest of it belongs to the version:
//
//	sluice-manifest 2 crc32c=1a2b3c4d len=612\n      magic, version, CRC-32C and length of the body
//	{"topic":"pageviews", "partition":0, "start":1000, "end":1500,
//	 "attempt":"20240501T140003Z-9f2c…", "committed":"2024-05-01T14:00:09Z",
//	 "records":500, "files":[{"temp":"_sluice/tmp/…", "final":"dt=…/pageviews+0+1000+1500.parquet",
//	 "records":500, "bytes":81234, "first_offset":1000, "last_offset":1499}]}
//
// A reader checks the version first: a newer one is ErrManifestVersion and
// the manifest is left exactly as it is (never taken for a torn one). Then
// the checksum over the body's raw bytes: a short or failing body is
// ErrTornManifest. Fields the reader does not know are ignored, so a newer
// writer adds fields without a new version; a change a reader must not
// ignore takes a new version. The origin record has the same envelope with
// magic sluice-origin and the body {"topic", "partition", "start", "created"}.
//
// # Commit protocol
//
//	NewAttempt: mkdir _sluice/tmp/…/<attempt>/, take the lease (renewed every Lease/3);
//	            until the first lease exists, the birth time in the attempt ID counts as one
//	   │
//	   ▼
//	write files under the attempt directory ── close (durable)
//	   │
//	   ▼
//	reader reached the split end? ── no ──► ErrNotReached (nothing done)
//	   │
//	   ▼
//	chain: start == origin (created exclusively by the first commit)
//	       or the manifest before start ends at start? ── no ──► ErrNotChained (retry later)
//	   │
//	   ▼
//	every file still there, and create <attempt>/_fate exclusively with the
//	intent (the manifest's bytes) ── reaped mark there, or directory gone? ──► ErrAttemptExpired
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
// manifests of the starts found there. For each attempt: the manifest names
// it: roll its moves forward; names another: delete it (it lost); no
// manifest but an intent: create the manifest from the intent (the
// attempt's own bytes), then roll forward; no intent and an expired lease:
// create the fate file with the reaped mark first (from then on the attempt
// cannot commit), then delete it; a live lease: leave it. A torn manifest (a
// dead HDFS writer's partial file) is moved aside after TornGrace. Leases
// are judged by the expiry in their names against the store's clock, never
// by file modification times (HDFS does not advance them while a file is
// written). Withdraw (replay) moves a commit's files and manifest under
// _sluice/withdrawn/, never deleting, into one directory marked
// .unfinished until done, which a re-run continues.
//
// # Durability (local disks)
//
// Data files and the intent are fsynced when closed or written, with their
// directory; manifests and origins are written to a temporary, fsynced and
// linked into place, with the directory fsynced; every directory MkdirAll
// creates is fsynced into its parent; a move fsyncs both directories. So a
// commit reported won survives a power loss with all its files (at their
// temporary or final paths: Recover finishes the moves). Removals are not
// synced: after a power loss an attempt's files may come back, and Recover
// removes them again. vfs.Durable makes these syncs (the writers' code never
// calls Sync), vfs.Mem models what they make durable, and the crash loop
// cuts the power at every operation of a load.
//
// # Invariants
//
//  1. At most one manifest exists per (topic, partition, start); its
//     existence (whole, checksum valid) is the commit of exactly its files.
//  2. Chain: the origin of a partition is created once, exclusively, and
//     never changes; a manifest [S, E) is created only when S is the origin
//     or a committed manifest ends at S. So the manifests of a partition
//     tile [origin, newest end) with no overlap and no gap (CheckTiling),
//     whatever the planners believed; the next split starts at the newest
//     manifest's end (NextStart), or at the origin when none is left.
//  3. A manifest [S, E) is created only when its reader reached E, and
//     each record offset of it is in exactly one file of the manifest.
//  4. A file appears under a final path only after its manifest exists, and
//     only the manifest's attempt (or recovery acting for it) moves it there;
//     so a final path holds a complete, committed file or nothing.
//  5. An attempt's fate is decided once: either it commits (its intent,
//     which recovery completes) or recovery reaps it (after its lease
//     expired); never both, so recovery never deletes files a manifest
//     lists, and a live attempt is never robbed.
//  6. Temporaries are unique per attempt, so roll-forward can be repeated or
//     run twice at once: a move either happens once or finds its work done.
//  7. Nothing committed is deleted: withdrawal and torn manifests are moved.
//     A manifest this version cannot read is never touched.
//
// Assumptions: the clocks of the workers and of whoever runs Recover agree
// to well within the Lease (a lease's expiry is written by the attempt's
// clock and read against recovery's); a manifest's HDFS writer that stalls
// mid-write for longer than TornGrace is dead; only one Withdraw of a partition runs at once and
// no attempt of it commits meanwhile (the loader's job lock, package jobs); the origin
// and the manifests are changed only through a Store.
//
// # What a loader does with each outcome of Commit
//
//	Won, nil                  done; the next split starts at res.Manifest.End
//	Won, error                committed; Recover finishes the moves
//	!Won, nil                 another attempt committed at this start: continue from res.Manifest.End
//	ErrNotReached             nothing done: read on to the end (or Abort)
//	ErrNotChained             nothing done, attempt kept: Commit again once the split before has
//	                          landed (Attempt().Renew() the lease while waiting), or Abort and
//	                          plan again from NextStart
//	ErrAttemptExpired         recovery took the attempt (lease expired): run the split again
//	ErrCommitUnknown          run Recover (it completes the commit from the intent; Abort
//	                          refuses once the intent is written), then NextStart
//	ErrManifestVersion        a newer sluice wrote this partition: upgrade; nothing was touched
//
// # Concurrency
//
// A Store is safe for concurrent use by attempts of different or equal
// splits (exclusivity comes from the file system); a SplitWriter is used by
// one goroutine. The package holds no locks across file-system calls but
// one: SplitWriters sharing a MemoryBudget (Config.Budget) may write each
// other's buffered rows out, so each open file has a lock, held by its
// writer for a record and by a budget flush for the row group it writes.
// A file's lock and the budget's are never held together.
//
// # Memory
//
// A Parquet file buffers the rows of its next row group (up to
// format.Options.RowGroupRows). A MemoryBudget bounds what all the open
// files sharing it buffer: past its limit, the file that buffers the most
// writes a row group early. The loader shares one among its tasks
// (writers.DefaultMemoryBudget unless jobs.Options says otherwise).
//
// # Example
//
//	fs, _ := filesystem.Open("hdfs://127.0.0.1:9000/warehouse/pageviews")
//	store := writers.NewStore(fs, writers.StoreOptions{})
//	store.Recover("pageviews", 0)
//	start, _ := store.NextStart("pageviews", 0, 0) // the newest manifest's end, the origin, or the default
//	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
//	w, _ := writers.NewSplitWriter(store, writers.Split{Topic: "pageviews", Partition: 0, Start: start, End: hw},
//		writers.Config{Format: format.Options{Kind: format.Parquet, Compression: "zstd", MetadataColumns: true},
//			Partitioner: part, MaxRecords: 1_000_000})
//	for _, r := range records { w.Write(schema, r.Value, format.Meta{Offset: r.Offset, Timestamp: r.Time}) }
//	res, err := w.Commit(reached) // reached: where the reader stopped; must be the split end
//	// res.Won: ours; !res.Won: another attempt committed a split at this start (res.Manifest)
//	// ErrNotChained: the split does not follow the partition's commits: retry later or re-plan
package writers
