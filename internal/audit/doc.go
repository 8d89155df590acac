// Package audit counts records per (tier, topic, window, origin), publishes
// the counts to the compacted _audit topic, and balances the books: did
// every record a producer had acknowledged reach the warehouse?
//
// # Tiers
//
//	producer ──► broker ──► load (committed manifests) ──► warehouse
//	   │                       │
//	   └── Counter + Hook      └── LoadCounts: the counts each manifest holds
//	       (acknowledged            (writers.AuditCounts, written with the
//	       records)                  commit, so never counted twice)
//	             │
//	             ▼
//	   Publisher ──► _audit (cleanup.policy=compact) ──► ReadCounts ──► Balance
//
// The broker tier (Broker, audit.enable in the broker) counts what a
// partition leader appended, by record time and by the broker's clock
// (TierBrokerClock, shown, never balanced), a transaction's records at its
// COMMIT; the mirror tier (Mirror, `sluice mirror --audit`) counts what the
// mirror copied, in the transaction of the copies. Broker and Mirror say
// what each guarantees. `sluice audit --source-bootstrap A` reads the
// producer and broker tiers of a mirror's source cluster (Relabel: its
// broker tier becomes TierSourceBroker) beside the target's tiers.
//
// A producer built on franz-go counts with a Hook (kgo.WithHooks): every
// record acknowledged (OnProduceRecordUnbuffered with a nil error) is
// counted by its record timestamp into windows of Window (default 10m), and
// a Reporter publishes the counts. `sluice produce --audit` and `sluice
// bench produce --audit` do that. The load tier is not published: `sluice
// audit --job` reads it from the job's committed manifests, the only place
// where it is exact, and so does the scheduler for a job with
// complete_when: audit (its _SUCCESS waits for the hour to balance).
//
// # Record format (version 1, JSON)
//
// One record per (tier, topic, window, origin); the key is text, the value JSON:
//
//	key:   <tier>/<topic>/<window start, Unix ms, or -1>/<origin>
//	value: {"version":1, "tier":"producer", "topic":"pageviews",
//	        "window_start_ms":1714568400000, "window_ms":600000,
//	        "origin":"host-a/4711/8c1f2e", "messages":1000, "bytes":81234,
//	        "malformed":0, "updated":"2024-05-01T13:10:02.5Z"}
//
// Counts are cumulative per key: an origin republishes a window's whole
// count whenever it grew, so compaction keeping the latest record per key
// keeps the right count and a republish replaces, never adds. The origin
// names one counting instance (host, process id and a random suffix: two
// processes never share a key; a window's cell let go of after its
// publish, Retain past its end, counts a later record under
// "<origin>~<epoch>", a key of its own). window_start_ms -1 holds the records without
// a timestamp (-1 in the log); malformed counts records the tier could not
// read (the load tier's bad records). A reader ignores fields it does not
// know; a change a reader must not ignore takes a new version, and readers
// skip records of a newer version (counted in Counts.Unreadable).
//
// # Balancing
//
// Balance sums each tier's counts per (topic, window) over origins and
// compares them with the producer tier. The load tier balances a window
// when loaded + filtered (by the job's where) equals the producer count;
// dead-lettered and malformed records are differences with their reason,
// and ranges deleted by retention before they were loaded
// (on_offset_out_of_range: skip, a manifest with no files) are named as the
// reason of the topic's missing records (their windows are unknown: the
// records are gone). A window that does not balance is "pending" until its
// end plus the lateness has passed, "missing" after.
//
// # Concurrency
//
// A Counter is safe for concurrent use (one mutex over its cells); a
// Reporter owns one goroutine that publishes every interval.
package audit
