package log

import "errors"

// Sentinel errors. Functions wrap them with %w and context; test with errors.Is.
var (
	// ErrCorruptBatch: a batch failed validation (length, magic, CRC, offsets).
	ErrCorruptBatch = errors.New("log: corrupt record batch")
	// ErrBatchTooLarge: a batch is larger than max.message.bytes.
	ErrBatchTooLarge = errors.New("log: record batch too large")
	// ErrInvalidRecord: a well-formed batch that is not acceptable (for
	// example a control batch sent by a client).
	ErrInvalidRecord = errors.New("log: invalid record")
	// ErrUnsupportedCompression: unknown compression codec in the attributes.
	ErrUnsupportedCompression = errors.New("log: unsupported compression codec")
	// ErrOffsetOutOfRange: an offset below the log start or above the log end.
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	// ErrOutOfOrderSequence: an idempotent producer skipped or reordered a
	// sequence number.
	ErrOutOfOrderSequence = errors.New("log: out of order sequence number")
	// ErrInvalidProducerEpoch: an idempotent producer used a stale epoch.
	ErrInvalidProducerEpoch = errors.New("log: invalid producer epoch")
	// ErrCoordinatorFenced: a transaction marker from a coordinator epoch
	// older than one already seen for the producer.
	ErrCoordinatorFenced = errors.New("log: transaction coordinator fenced")
	// ErrClosed: the log or manager was closed.
	ErrClosed = errors.New("log: closed")
	// ErrExists: the partition already exists (or is already open).
	ErrExists = errors.New("log: already exists")
	// ErrLogFailed: an earlier I/O error left the in-memory state uncertain;
	// the log refuses writes until it is reopened (which runs recovery).
	ErrLogFailed = errors.New("log: failed after an I/O error; reopen to recover")
)

// IsCorrupt reports whether err means corrupt bytes (from a client or on disk).
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorruptBatch) }
