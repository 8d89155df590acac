package server

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	plog "github.com/sluicehq/sluice/broker/log"
)

// Sentinel errors of the server package.
var (
	// ErrStorage wraps a failure to read or write the server's metadata files.
	ErrStorage = errors.New("server: storage")
	// ErrCorruptMeta is returned when a metadata file cannot be parsed.
	ErrCorruptMeta = errors.New("server: corrupt metadata file")
	// ErrDataDirInUse is returned by New when another broker holds the
	// data directory's lock.
	ErrDataDirInUse = errors.New("server: data directory in use")
	// ErrClosed is returned after Shutdown.
	ErrClosed = errors.New("server: closed")
	// ErrBadFrame is a request frame that cannot be served (size, header,
	// unknown key, unsupported version, undecodable body); the connection
	// is closed.
	ErrBadFrame = errors.New("server: bad request frame")
)

// appendErrorCode maps a broker/log Append error to the Kafka error code of
// the partition's answer.
func appendErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, plog.ErrBatchTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, plog.ErrUnsupportedCompression):
		return kerr.UnsupportedCompressionType.Code
	case errors.Is(err, plog.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, plog.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, plog.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, plog.ErrCorruptBatch), plog.IsCorrupt(err):
		return kerr.CorruptMessage.Code
	case errors.Is(err, plog.ErrClosed):
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.KafkaStorageError.Code
}

// readErrorCode maps a broker/log Read / offset lookup error to a Kafka code.
func readErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, plog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, plog.ErrClosed):
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.KafkaStorageError.Code
}
