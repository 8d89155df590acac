// Package workload holds the chaos harness's clients: each talks to any
// Kafka-protocol bootstrap address (a sluice broker, a cluster, Apache
// Kafka) or a warehouse and records every operation with its outcome into a
// history.Recorder, for history.Check to judge afterwards.
//
//	Producer      unique values "<prefix>-<n>", one produce at a time,
//	              acks=all or acks=1, idempotent or not (franz-go kgo)
//	Consume       a consumer of assigned partitions: an assign, then every
//	              poll with each (partition, offset, value)
//	ConsumeGroup  a group member: the committed offsets it starts from
//	              (fetch-committed + assign), its polls, a commit after each
//	FinalRead     every partition from its log start to its high watermark
//	LoadSpec,     a load job of the topic into a local warehouse, its runs,
//	RunLoad,      and the warehouse read back with DuckDB (every data file
//	ReadWarehouse at a final path, as an outside reader sees them; the
//	              committed ranges from the manifests)
//
// Outcomes: a produce is ok when acknowledged, fail only for the errors
// that mean the broker refused the record itself (it never landed: too
// large, invalid, not authorized, an invalid topic name), unknown for everything
// else (timeouts, lost connections, a retried attempt's error). A commit
// refused for its generation is fail; other commit errors unknown.
//
// Process ids are the caller's: give each client its own, and a new one to
// a client that starts over after a crash.
package workload
