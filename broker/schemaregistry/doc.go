// Package schemaregistry is a Confluent Schema Registry compatible service
// (the REST API subset below, Confluent's JSON shapes, content type and
// error codes) whose state lives in a compacted Kafka topic, `_schemas` by
// default. Producers using franz-go's sr package or Confluent serializers,
// and the sluice loader, use it unchanged. Only Avro schemas are served:
// parsed, canonicalized and compared with hamba/avro; JSON and PROTOBUF
// schemas are refused with 42201.
//
// # Embedding
//
//	reg, err := schemaregistry.New(ctx, schemaregistry.Options{Bootstrap: []string{"127.0.0.1:9092"}})
//	if err != nil { ... }
//	ln, _ := net.Listen("tcp", "127.0.0.1:8081")
//	go reg.Serve(ln)          // or mount reg.Handler() in your own server
//	defer reg.Close(ctx)
//
// # Endpoints
//
//	GET    /subjects[?deleted=true]
//	POST   /subjects/{s}/versions                       register → {"id": N}
//	GET    /subjects/{s}/versions[?deleted=true]
//	GET    /subjects/{s}/versions/{v|latest}[/schema]
//	DELETE /subjects/{s}/versions/{v|latest}[?permanent=true]
//	POST   /subjects/{s}[?deleted=true]                 look up a schema
//	DELETE /subjects/{s}[?permanent=true]
//	GET    /schemas/ids/{id}[/schema|/versions|/subjects]
//	GET    /schemas/types
//	GET|PUT|DELETE /config and /config/{s}[?defaultToGlobal=true]
//	POST   /compatibility/subjects/{s}/versions[/{v|latest}][?verbose=true]
//	GET    /metrics                                     Prometheus
//
// # Records of the _schemas topic
//
// One partition (a total order), cleanup.policy=compact. Keys and values
// are JSON; a nil value is a tombstone.
//
//	key                                                    value
//	{"keytype":"SCHEMA","subject":S,"version":V,           {"subject":S,"version":V,"id":N,"schema":TEXT,
//	                                                        "schemaType":T,"references":[...]} (T, refs optional)
//	 "nonce":U,"magic":1}                                  one registration; tombstone = permanent delete
//	{"keytype":"DELETE_VERSION","subject":S,"version":V,   {"subject":S,"version":V,"nonce":U}
//	 "nonce":U,"delete":D,"magic":1}                       soft delete D of registration U
//	{"keytype":"CONFIG","subject":S,"magic":0}             {"compatibilityLevel":L}; no subject = global;
//	                                                       tombstone = back to the default
//	{"keytype":"ID","id":N,"magic":0}                      {"id":N}: id N was used, never hand it out again
//
// The nonce U makes every registration record's key unique, and a
// registration is never rewritten (a soft delete is a record of its own),
// so compaction keeps each live registration where it was written: the
// order of the live records, which decides the races below, survives
// compaction. A soft delete's key is unique too (its own nonce D): two
// instances may soft-delete one version, and were the second record to
// replace the first, compaction would move the delete past a later
// registration of the same schema that the first delete had let in.
//
// # Writes, ids and races
//
// Every instance reads the topic from the start and applies each record
// with the same rules (state.apply), so every instance that has read the
// same prefix holds the same state. A write goes through the log: the
// instance catches up with the topic's end, decides (next version, the
// schema's id or max id + 1), produces, and waits until its own reader has
// applied its record. Two instances may decide alike at the same time; the
// rules settle it in log order. A registration is accepted only when
//
//  1. its version is above every version of its subject,
//  2. its schema is not already a live version of the subject, and
//  3. its id is the schema's existing id, or above every id used so far.
//
// The loser sees its record rejected and retries with a fresh view (a new
// version and id). Ids are therefore global (one schema, one id, across
// subjects), grow, are never reused (the ID record survives a permanent
// delete), and are the same on every instance and after every restart.
// Compaction must never drop a winner and keep a loser it beat, which a
// replay would then accept. So every instance that sees a rejected record
// writes its tombstone once caught up, and a permanent delete first writes
// the tombstones its caught-up view still misses, before its own.
// TestRacingWritersAndCompaction checks that the compacted log gives the
// same state as the whole log, with the cleanup, and without it when deletes
// do not race. Remaining limit: a loser written after a permanent delete's
// catch-up and before its tombstones, if every instance then stops before
// tombstoning it, can be accepted by a replay once compaction has dropped
// the deleted winner.
//
// Compatibility is checked by the writer against its caught-up view; the
// log rules do not re-check it. The check runs outside both locks, against
// a snapshot of the subject (its level and live versions); under writeMu,
// caught up again, the record is written only if the subject still matches
// the snapshot, else the schema is checked again (at most 16 attempts).
//
// # Bounds on one request
//
//   - A body is read before the request takes one of 64 work slots, within
//     Options.BodyTimeout (5 s; else 408) and MaxRequestBytes (1 MiB; else
//     413, at once when the declared length is over). While it arrives it
//     holds only its bytes plus one 16 KiB read of a budget of 64 times
//     MaxRequestBytes shared by all bodies: slow clients hold no slot.
//   - A schema is at most 512 KiB in canonical form (42209) and nested at
//     most 256 levels (42201); references nest at most 16 deep and name at
//     most 256 schemas, transitively (42201); they cannot form a cycle (each
//     names a version registered before).
//   - A compatibility check (a registration's, or POST /compatibility)
//     spends at most Options.MaxCheckSteps steps (10,000,000: one per pair
//     of schema nodes compared, field, alias or enum symbol looked at,
//     summed over the versions compared; about a second of one core). A
//     15,000-field record against one version under FULL takes about
//     90,000. A check past the bound is refused with 42201, naming it.
//
// # Concurrency
//
// Lock order: store.writeMu (one write at a time per instance) before
// store.mu (the state and the reader's position). Handlers read the state
// under store.mu's read lock and parse and check schemas holding neither
// lock; the reader goroutine parses new schemas before it takes mu, and
// applies records under its write lock.
package schemaregistry
