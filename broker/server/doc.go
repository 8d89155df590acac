// Package server is sluice's Kafka-protocol server: it accepts TCP
// connections, frames requests, decodes them with franz-go's kmsg, dispatches
// them through a table (one file per API) and writes the answers back in
// request order. Fetch answers are written around the segment bytes so that
// the records go out with sendfile(2).
//
// Wire framing (all integers big-endian):
//
//	request:  +--------+--------+---------+---------+-----------------+--------+------------+
//	          | size   | apiKey | version | corrID  | clientID        | tags   | body ...   |
//	          | int32  | int16  | int16   | int32   | int16 len+bytes | (flex) | (kmsg)     |
//	          +--------+--------+---------+---------+-----------------+--------+------------+
//	response: +--------+---------+--------+------------------------------------------------+
//	          | size   | corrID  | tags   | body (kmsg, or hand-encoded Fetch with the     |
//	          | int32  | int32   | (flex, | records fields spliced in from segment files)  |
//	          |        |         | not    |                                                |
//	          |        |         | ApiVer)|                                                |
//	          +--------+---------+--------+------------------------------------------------+
//
// A frame larger than socket.request.max.bytes, a negative size, an unknown
// API key, a version outside the served range (except ApiVersions, which is
// answered in v0 with UNSUPPORTED_VERSION) or a body kmsg cannot decode
// closes that connection only; the handler never panics on client input.
//
// Bounds on what one client can cause (README "Limits"): accept errors back
// off and retry; max.connections and max.connections.per.ip close new
// connections beyond them; a frame's buffer grows only as its bytes arrive,
// and all frames read and not yet answered hold at most
// queued.max.request.bytes (requestMemory: readers wait, TCP pushes back);
// APIs whose requests are small in practice refuse large frames before
// decoding (api.maxFrame), Metadata is decoded with its repeated topics
// dropped and Produce's partition entries are counted before decoding
// (api.decode); Fetch answers at most fetch.max.bytes (hard cap 1 GiB).
//
// Concurrency: per connection one reader goroutine reads frames into a
// bounded queue (8 frames, and no new frame while 16 MiB are queued) and one
// processing goroutine handles them strictly in order
// and writes the answers (so idempotent producers' pipelined batches are
// appended in the order sent, and answers leave in request order). Frame
// buffers of up to 1 MiB are recycled once their request is answered; no
// handler keeps a reference into a request frame. Shared
// state: the topic registry (registry.mu, a RWMutex) and, per partition,
// partition.mu, which serialises append + high-watermark update. Lock order:
// registry.mu before partition.mu; no lock is held while waiting in a Fetch
// long poll or writing to a socket. Server.mu (listeners, connections and
// their per-IP counts) and requestMemory.mu are leaves: nothing else is
// taken under them. The producer-id allocator has its own
// mutex and takes no other lock. The group coordinator (broker/group) holds
// its own mutex while it appends to __consumer_offsets through the registry:
// Coordinator.mu before registry.mu before partition.mu; JoinGroup and
// SyncGroup wait for their answer without any lock.
//
// Topic metadata (topics, ids, partition counts, config overrides) and
// producer-id blocks live in a metadata.Store (Options.Metadata): by default
// a metadata.FileStore, topics.json and producer-ids.json next to the
// partition directories; in cluster mode (Options.Cluster, cluster.go) the
// cluster's Store in ZooKeeper, with the partitions assigned to this broker
// opened as the cluster's partition states arrive. The registry
// (registry.go) is the serving view of that store: each topic with its open
// partition logs. CreateTopics and DeleteTopics hold registry.mu only to
// reserve the name and to publish the result, never while the store is
// written or partition directories are created or removed, so a
// 65,536-partition topic does not stall traffic to the others.
//
// Time: fetch long polls, fetch sessions, the retention loop, the partition
// logs and the group coordinator's decisions use Options.Clock
// (internal/clock: clock.Real in production, clock.Manual in tests); only
// the 100 ms poll that calls the coordinator's Tick runs on the wall clock.
//
// Usage:
//
//	srv, err := server.New(server.Options{DataDir: dir, Config: config.Default()})
//	ln, _ := net.Listen("tcp", "127.0.0.1:9092")
//	go srv.Serve(ln)
//	...
//	srv.Shutdown(ctx) // stop accepting, drain, close the logs cleanly
package server
