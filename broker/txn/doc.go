// Package txn is sluice's transaction coordinator (KIP-98, with KIP-360's
// producer recovery and KIP-890 part 1's produce verification): it hands
// transactional producers their id and epoch, records which partitions
// (and which groups' offsets) a transaction touches, and ends a transaction
// by writing COMMIT or ABORT markers to every one of them. Its state lives
// in the compacted internal topic __transaction_state, one record per
// transactional id, replayed at start.
//
// # States (Kafka's, as kmsg.TransactionState)
//
//	             InitProducerId (epoch bump)
//	+-------+ <---------------------------------------------+
//	| Empty |                                               |
//	+-------+                                               |
//	    | AddPartitionsToTxn / AddOffsetsToTxn              |
//	    v                                                   |
//	+---------+  EndTxn(commit)   +---------------+ markers +----------------+
//	| Ongoing | ----------------> | PrepareCommit | ------> | CompleteCommit |
//	+---------+                   +---------------+ written +----------------+
//	 |  |  EndTxn(abort)          +---------------+ markers +----------------+
//	 |  +-----------------------> | PrepareAbort  | ------> | CompleteAbort  |
//	 |  InitProducerId (fence),   +---------------+ written +----------------+
//	 |  transaction.timeout.ms       ^ (epoch + 1)             |  AddPartitions:
//	 +-------------------------------+                         v  back to Ongoing
//
// Every transition is first written to __transaction_state and applied in
// memory only once the append returned, so what a client was told is what a
// restart replays. A transaction found in PrepareCommit or PrepareAbort at
// start (the broker died while writing markers, some written, some not) has
// all its markers written again (a second marker for a producer is
// harmless: the log takes it as closing nothing) and is then completed.
// Markers are written synchronously by EndTxn, so the answer to EndTxn
// comes once every partition is committed or aborted; if a marker cannot be
// written the transaction stays in its prepare state (clients get
// CONCURRENT_TRANSACTIONS) and Tick retries it.
//
// Fencing: InitProducerId for a transactional id whose transaction is
// Ongoing aborts that transaction with the epoch bumped by one (the markers
// carry it, so the partitions refuse the old producer's batches), then bumps
// the epoch again for the new producer. A transaction open longer than its
// transaction.timeout.ms is aborted by Tick the same way (counted in
// Stats.TimedOut). KIP-360: an InitProducerId that names the producer's
// current id and epoch bumps the epoch (a producer recovering from an
// abortable error); a retry naming the previous epoch gets the current one;
// any other id/epoch is PRODUCER_FENCED.
//
// KIP-890 part 1: the broker appends a transactional batch only inside
// Coordinator.Guard, which checks that the batch's partition was added to the
// producer's ongoing transaction and holds the transaction's lock over the
// append, so no marker can slip between the check and the append (the
// hanging transaction Jepsen found in Kafka).
//
// # Records of __transaction_state (Kafka's formats)
//
//	key:   TransactionLogKey   version int16 = 0 | transactional_id string
//	value: TransactionLogValue version int16 = 1 | producer_id int64 |
//	       producer_epoch int16 | transaction_timeout_ms int32 | state int8 |
//	       partitions [topic, [partition int32]] | last_update_ms int64 |
//	       start_ms int64 | tags (0: previous producer id)
//
// as kmsg.TxnMetadataKey / TxnMetadataValue encode them, in uncompressed
// batches without a producer. A transactional id maps to partition
// abs(javaHashCode(id)) % partitions, as in Kafka, so Kafka's tools can read
// the topic.
//
// # Ownership (for the cluster)
//
// The coordinator of a transactional id is the leader of its partition of
// __transaction_state. Options.Ownership answers "do I own partition N, and
// at which coordinator epoch"; a request for an id whose partition is not
// owned gets NOT_COORDINATOR. A single node owns every partition at epoch 0.
// A cluster calls Load(N, epoch) when this broker becomes the partition's
// leader (replays it, completes its prepared transactions) and Unload(N)
// when it stops being so.
//
// # Bounds
//
// A transactional id is at most 32,767 bytes (Kafka's string limit before
// flexible versions; longer: INVALID_REQUEST); at most
// transaction.max.ids ids are held (more: an InitProducerId for a new id is
// answered INVALID_REQUEST, which clients do not retry); a transaction
// holds at most transaction.max.partitions partitions (more:
// INVALID_REQUEST on the partitions of the request); and its record must
// fit one batch of __transaction_state (else MESSAGE_TOO_LARGE).
//
// # Concurrency
//
// Coordinator.mu guards the map of transactions; each transaction has its
// own mutex, held over a whole operation (the state log append, markers,
// a guarded produce). Lock order: transaction.mu -> Coordinator.mu, and
// transaction.mu -> whatever Markers, StateLog and a Guard's function take
// (partition locks, the group coordinator's lock). Coordinator.mu is never
// held while a transaction's lock is taken.
package txn
