package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/sluicehq/sluice/internal/vfs"
)

// Small metadata files (partition checkpoint, leader-epoch cache, producer
// snapshots) share one frame:
//
//	+-------+---------+-------------+----------+
//	| magic | version | payload ... | crc32c   |
//	| 4 B   | 1 B     |             | 4 B (BE) |
//	+-------+---------+-------------+----------+
//
// The CRC covers magic, version and payload. Files are written under a
// temporary name, synced, renamed over the old one and the directory synced,
// so a reader sees either the old or the new file, never a mix.
const (
	checkpointFile  = "partition.checkpoint"
	epochFile       = "leader-epoch-checkpoint"
	snapshotSuffix  = ".snapshot"
	tmpSuffix       = vfs.TempSuffix // a temporary of vfs.WriteFileAtomic
	cleanMarkerFile = ".clean-shutdown"
	frameVersion    = 1
)

var (
	magicCheckpoint = [4]byte{'S', 'L', 'C', 'P'}
	magicEpochs     = [4]byte{'S', 'L', 'E', 'P'}
	magicProducers  = [4]byte{'S', 'L', 'P', 'S'}
)

func frame(magic [4]byte, payload []byte) []byte {
	return frameVersioned(magic, frameVersion, payload)
}

// frameVersioned frames payload with its own format version.
func frameVersioned(magic [4]byte, version byte, payload []byte) []byte {
	b := make([]byte, 0, 9+len(payload))
	b = append(b, magic[:]...)
	b = append(b, version)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// unframe checks a frame of version frameVersion and returns its payload.
func unframe(magic [4]byte, b []byte) ([]byte, error) {
	p, _, err := unframeVersioned(magic, b, frameVersion, frameVersion)
	return p, err
}

// unframeVersioned checks a frame whose version is in [minVersion,
// maxVersion] and returns its payload and version.
func unframeVersioned(magic [4]byte, b []byte, minVersion, maxVersion byte) ([]byte, byte, error) {
	if len(b) < 9 || [4]byte(b[:4]) != magic {
		return nil, 0, fmt.Errorf("%w: bad magic or short file (%d bytes)", ErrCorruptBatch, len(b))
	}
	if b[4] < minVersion || b[4] > maxVersion {
		return nil, 0, fmt.Errorf("%w: unknown version %d", ErrCorruptBatch, b[4])
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", ErrCorruptBatch)
	}
	return body[5:], b[4], nil
}

// partitionCheckpoint is the content of partition.checkpoint.
type partitionCheckpoint struct {
	LogStartOffset int64
	HighWatermark  int64
	// The recovery point: everything below RecoveryOffset is known to be
	// synced; it starts at byte RecoveryPosition of segment RecoverySegment.
	RecoveryOffset   int64
	RecoverySegment  int64
	RecoveryPosition int64
	// ProducersAt: the idempotent-producer table as of this offset equals the
	// newest producer snapshot at or below it (or is empty if there is none),
	// so rebuilding it replays only the batches after ProducersAt.
	ProducersAt int64
}

func (c partitionCheckpoint) encode() []byte {
	var p []byte
	for _, v := range []int64{c.LogStartOffset, c.HighWatermark, c.RecoveryOffset, c.RecoverySegment, c.RecoveryPosition, c.ProducersAt} {
		p = binary.BigEndian.AppendUint64(p, uint64(v))
	}
	return frame(magicCheckpoint, p)
}

func decodeCheckpoint(b []byte) (partitionCheckpoint, error) {
	p, err := unframe(magicCheckpoint, b)
	if err != nil {
		return partitionCheckpoint{}, err
	}
	if len(p) != 48 {
		return partitionCheckpoint{}, fmt.Errorf("%w: checkpoint payload of %d bytes", ErrCorruptBatch, len(p))
	}
	v := func(i int) int64 { return int64(binary.BigEndian.Uint64(p[8*i:])) }
	c := partitionCheckpoint{v(0), v(1), v(2), v(3), v(4), v(5)}
	if c.LogStartOffset < 0 || c.RecoveryOffset < c.RecoverySegment || c.RecoverySegment < 0 || c.RecoveryPosition < 0 {
		return c, fmt.Errorf("%w: checkpoint values out of range: %+v", ErrCorruptBatch, c)
	}
	return c, nil
}

// epochEntry: leader epoch Epoch began at offset StartOffset.
type epochEntry struct {
	Epoch       int32
	StartOffset int64
}

func encodeEpochs(es []epochEntry) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(len(es)))
	for _, e := range es {
		p = binary.BigEndian.AppendUint32(p, uint32(e.Epoch))
		p = binary.BigEndian.AppendUint64(p, uint64(e.StartOffset))
	}
	return frame(magicEpochs, p)
}

func decodeEpochs(b []byte) ([]epochEntry, error) {
	p, err := unframe(magicEpochs, b)
	if err != nil {
		return nil, err
	}
	if len(p) < 4 {
		return nil, fmt.Errorf("%w: epoch file too short", ErrCorruptBatch)
	}
	n := int(binary.BigEndian.Uint32(p))
	p = p[4:]
	if n < 0 || n*12 != len(p) {
		return nil, fmt.Errorf("%w: epoch file says %d entries in %d bytes", ErrCorruptBatch, n, len(p))
	}
	es := make([]epochEntry, n)
	for i := range es {
		es[i] = epochEntry{int32(binary.BigEndian.Uint32(p[12*i:])), int64(binary.BigEndian.Uint64(p[12*i+4:]))}
		if i > 0 && (es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset < es[i-1].StartOffset) {
			return nil, fmt.Errorf("%w: epoch entries not increasing", ErrCorruptBatch)
		}
	}
	return es, nil
}
