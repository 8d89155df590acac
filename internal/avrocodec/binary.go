package avrocodec

import (
	"errors"
	"fmt"
)

// Avro binary: longs and ints are zig-zag varints (at most 10 and 5
// bytes); strings and bytes a long length and the content; see doc.go.

// maxValueBytes is the largest string or bytes value a record may hold: the
// generic decoder's limit (hamba/avro's MaxByteSliceSize default), so that
// both paths refuse the same records.
const maxValueBytes = 1 << 20

var errShort = errors.New("unexpected end of the record")

// readVarint reads an unsigned varint of at most max bytes at b[i:].
func readVarint(b []byte, i, max int) (uint64, int, error) {
	var u uint64
	for n := 0; n < max; n++ {
		if i >= len(b) {
			return 0, i, errShort
		}
		c := b[i]
		i++
		u |= uint64(c&0x7f) << (7 * n)
		if c < 0x80 {
			return u, i, nil
		}
	}
	return 0, i, fmt.Errorf("varint is longer than %d bytes", max)
}

// zigzag64 and zigzag32 decode Avro's zig-zag coding; an int keeps the low
// 32 bits of its varint, as the generic decoder does.
func zigzag64(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
func zigzag32(u uint64) int32 { v := uint32(u); return int32(v>>1) ^ -int32(v&1) }

// readLong reads a long (at most 10 bytes) at b[i:].
func readLong(b []byte, i int) (int64, int, error) {
	u, i, err := readVarint(b, i, 10)
	return zigzag64(u), i, err
}

// readInt reads an int (at most 5 bytes) at b[i:].
func readInt(b []byte, i int) (int32, int, error) {
	u, i, err := readVarint(b, i, 5)
	return zigzag32(u), i, err
}

// varintAt reads a varint the scan has checked.
func varintAt(b []byte, i int) (uint64, int) {
	var u uint64
	for s := uint(0); ; s += 7 {
		c := b[i]
		i++
		u |= uint64(c&0x7f) << s
		if c < 0x80 {
			return u, i
		}
	}
}

// longAt and intAt read a long and an int the scan has checked.
func longAt(b []byte, i int) (int64, int) {
	u, i := varintAt(b, i)
	return zigzag64(u), i
}

func intAt(b []byte, i int) (int32, int) {
	u, i := varintAt(b, i)
	return zigzag32(u), i
}

// readBytes reads the length of a string or bytes value at b[i:] and
// returns where its content begins and ends.
func readBytes(b []byte, i int) (int, int, error) {
	n, i, err := readLong(b, i)
	if err != nil {
		return 0, i, err
	}
	if n < 0 {
		return 0, i, fmt.Errorf("negative length %d", n)
	}
	if n > maxValueBytes {
		return 0, i, fmt.Errorf("a value of %d bytes is over the limit of %d", n, maxValueBytes)
	}
	if n > int64(len(b)-i) {
		return 0, i, errShort
	}
	return i, i + int(n), nil
}

// AppendLong appends x as an Avro long.
func AppendLong(b []byte, x int64) []byte {
	u := uint64(x<<1) ^ uint64(x>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// AppendString appends s as an Avro string (or bytes).
func AppendString(b []byte, s string) []byte {
	return append(AppendLong(b, int64(len(s))), s...)
}

// ReadLong reads an Avro long (a zigzag varint of at most 10 bytes) at
// b[i:]: its value and where it ends. The jobs' explode walks an array's
// blocks with it.
func ReadLong(b []byte, i int) (int64, int, error) { return readLong(b, i) }
