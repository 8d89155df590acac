// Package history records what clients did to a Kafka-protocol cluster and
// a warehouse, and checks the record for anomalies, in the manner of
// Jepsen's Kafka checker: clients never see the system's state, only the
// outcomes of their own operations, so every guarantee is stated over those
// outcomes.
//
// # Model
//
// A History is a list of operations (Op), each done by one process (a
// client: a producer, a consumer session, a loader). A process does one
// operation at a time; a consumer that restarts or reseeks takes a new
// process id or records an assign. Time is an order, not a clock: the
// Recorder hands out ticks from one counter (Ticks), so Start < End for
// every operation, and A happened before B (real-time order) when A.End <
// B.Start. Overlapping operations are concurrent and may be ordered either
// way. A tick must be taken when the operation begins and when it ends,
// never when the recorder hears of it: a client in another process (a
// group member node) records on its own Recorder over the same counter
// (OpenTicks, a file both map) and the test takes its operations with
// their ticks unchanged (Recorder.Take).
//
//	process 1  ──[produce v1 ok @p0/5]──────[produce v2 unknown]──
//	process 2  ─────[poll p0: 4=v0 5=v1]──────[poll p0: 6=v2]─────
//	process 9                                        ──[final-read p0 [0,7)]──
//	ticks      0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 ──►
//
// Kinds and what their fields mean:
//
//	produce          Value sent to Topic/Partition; when ok, Offset is the
//	                 acknowledged offset (or -1 when the client does not say);
//	                 Idempotent, the producer's idempotence; Attempts, the
//	                 Produce requests that carried it (retries included)
//	poll             Records a consumer received, in the order received
//	assign           the consumer's position was (re)set: Offsets name the
//	                 partitions and the offset it starts at (-1 unknown);
//	                 its poll sequence of those partitions starts over
//	commit           Group committed Offsets (next offset to consume)
//	fetch-committed  Group's committed Offsets as read back (ok only)
//	final-read       Records of whole partitions read after the faults:
//	                 Ranges say which [Start, End) of which partitions it
//	                 read completely
//	load-read        Records read back from the warehouse (with their
//	                 _partition and _offset metadata columns); Ranges say
//	                 which offsets the loads committed, so must hold; Want
//	                 which the workload waited for the loads to commit
//	load             a run of loads (its outcome and Error only)
//
// Outcomes: ok (the operation took effect and its result is known), fail
// (it definitely did not take effect: the server refused it), unknown (a
// timeout, a lost connection, a crash: it may or may not have taken effect).
// A client that cannot tell records unknown; recording fail when unsure
// makes the checker report false anomalies.
//
// # File format
//
// A history is kept as JSON lines, one Op per line in the order recorded, so
// a run's history sits in its report directory and is re-checked offline
// (history.ReadFile, then Check). Fields are never renamed; new fields may
// be added (a reader ignores fields it does not know) and absent fields
// take their zero values, so omitted offsets must be written as -1.
//
//	{"id":0,"process":1,"kind":"produce","outcome":"ok","start":0,"end":3,"topic":"t","partition":0,"offset":5,"value":"1-0"}
//	{"id":1,"process":2,"kind":"poll","outcome":"ok","start":1,"end":4,"records":[{"topic":"t","partition":0,"offset":5,"value":"1-0"}]}
//
// # Anomalies (Check)
//
// Values are unique: a workload never produces one value twice, but to
// retry a produce whose outcome it did not learn. Check
// reports each anomaly with the ids of the operations that show it:
//
//	lost             an ok produce whose value a final-read (begun after
//	                 the produce ended and covering its partition and
//	                 acknowledged offset) does not contain
//	duplicate        one value at more positions (topic, partition, offset),
//	                 in any reads or acknowledgements, than its produces
//	                 allow: one if any produce of it was idempotent (the
//	                 broker appends a retried batch once); else one per
//	                 Produce request that carried it (a non-idempotent
//	                 producer whose acknowledgement was lost and that sent
//	                 the value again may have it appended twice: Kafka's
//	                 semantics, counted in Stats.RetryDuplicates)
//	inconsistent     one position holding two values across reads and
//	                 acknowledgements
//	nonmonotonic     a poll sequence (one process, one partition, since its
//	                 last assign) whose offsets do not strictly increase
//	skip             a poll sequence that jumps over an offset some read
//	                 shows holds a record (from an assign's known offset,
//	                 or between two consecutive polls)
//	phantom          a read value that no produce wrote, or whose only
//	                 produces ended in fail, or that was read before any
//	                 produce of it began
//	commit-backwards a group's committed offset of a partition observed
//	                 (by ok commit or fetch-committed) lower than one
//	                 observed by an operation that ended before it began
//	load-duplicate   a value loaded into the warehouse more than once from
//	                 one position, or from more positions than it may hold
//	load-lost        an ok produce whose acknowledged offset lies in a
//	                 load-read's Ranges but whose value it does not hold
//	load-incomplete  an ok produce that ended before a load-read began,
//	                 acknowledged in its Want but in none of its Ranges:
//	                 the loads made no progress over it (one anomaly per
//	                 partition); without Want a run that loaded nothing
//	                 would pass, as nothing committed could be missing
//
// Produces of unknown outcome may be present or absent anywhere, but never
// more often than they were sent: duplicate and load-duplicate apply to
// them as to ok ones. A lost acknowledged write has no such allowance:
// whatever the producer's acks or idempotence, an ok produce is lost when a
// final read lacks it (a scenario whose promise is weaker, a power loss
// without flush.messages=1, filters the anomalies it allows itself). A
// produce that failed must not be read (phantom). Reads of the unknown are
// fine.
//
// # Concurrency
//
// A Recorder is safe for concurrent use: Invoke takes a tick from an atomic
// counter, Complete takes the Recorder's mutex to take the end tick, append
// and write the line, so the file's order is the completion order — except
// for operations Taken from another process, which come in the order they
// arrive, each with the ticks it had there.
//
// # Usage
//
//	rec := history.NewRecorder(file)
//	p := rec.Invoke(1, history.Produce)
//	off, err := produce(value)
//	p.Complete(history.Op{Outcome: outcome(err), Topic: "t", Partition: 0, Offset: off, Value: value})
//	...
//	res := history.Check(rec.History())
//	if !res.OK() { t.Fatal(res.Report(rec.History(), 2)) }
package history
