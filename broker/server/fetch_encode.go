package server

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kbin"

	plog "github.com/sluicehq/sluice/broker/log"
)

// zeroCopyMin is the smallest record range sent with Region.WriteTo
// (sendfile); smaller ones are copied into the frame buffer, where an extra
// syscall pair would cost more than the copy.
const zeroCopyMin = 16 << 10

// fetchReply is a Fetch answer written around its record ranges. The frame
// is encoded by hand (Kafka's FetchResponse v4-v12 layout, the same fields
// kmsg.FetchResponse.AppendTo writes) so that each partition's Records
// field can be filled from a segment file:
//
//	[size][corrID][tags v12] throttle errorCode(v7+) sessionID(v7+)
//	topics: name, partitions: partition errorCode hw lso logStart(v5+)
//	        aborted (fetch_txn.go) preferredReadReplica(v11+) records-length | records... | tags(v12:
//	        DivergingEpoch, tag 0, when set)
type fetchReply struct {
	version   int16
	errorCode int16
	sessionID int32
	topics    []fetchTopic
}

// release closes every region held.
func (r *fetchReply) release() {
	for ti := range r.topics {
		for pi := range r.topics[ti].parts {
			if reg := r.topics[ti].parts[pi].region; reg != nil {
				_ = reg.Close()
				r.topics[ti].parts[pi].region = nil
			}
		}
	}
}

func (r *fetchReply) write(c *conn, hdr header) error {
	defer r.release()
	flex := r.version >= 12
	f := &fetchFrame{buf: make([]byte, 4, 512)}
	f.buf = appendResponseHeader(f.buf, hdr, flex)
	f.buf = kbin.AppendInt32(f.buf, 0) // throttle
	if r.version >= 7 {
		f.buf = kbin.AppendInt16(f.buf, r.errorCode)
		f.buf = kbin.AppendInt32(f.buf, r.sessionID)
	}
	f.buf = appendArrayLen(f.buf, len(r.topics), flex)
	for ti := range r.topics {
		t := &r.topics[ti]
		f.buf = appendString(f.buf, t.name, flex)
		f.buf = appendArrayLen(f.buf, len(t.parts), flex)
		for pi := range t.parts {
			if err := r.encodePartition(c, f, ti, pi, flex); err != nil {
				return err
			}
		}
		if flex {
			f.buf = append(f.buf, 0) // topic tags
		}
	}
	if flex {
		f.buf = append(f.buf, 0) // response tags
	}
	if err := f.seal(); err != nil {
		return err
	}
	return r.send(c, f)
}

// fetchFrame is a Fetch answer being encoded: byte chunks, between which
// the regions of large record sets are sent with sendfile.
type fetchFrame struct {
	chunks [][]byte // byte chunks; a nil entry means "write the next region of refs"
	refs   [][2]int // (topic, partition) index of each region written with sendfile
	total  int64    // frame size including the 4-byte size prefix
	buf    []byte   // the chunk being appended to
}

// encodePartition appends the answer of partition pi of topic ti: its
// header fields, then its records inline (under zeroCopyMin) or as a
// region sent with sendfile.
func (r *fetchReply) encodePartition(c *conn, f *fetchFrame, ti, pi int, flex bool) error {
	t := &r.topics[ti]
	p := &t.parts[pi]
	f.buf = kbin.AppendInt32(f.buf, p.partition)
	f.buf = kbin.AppendInt16(f.buf, p.code)
	f.buf = kbin.AppendInt64(f.buf, p.hw)
	f.buf = kbin.AppendInt64(f.buf, p.lastStable)
	if r.version >= 5 {
		f.buf = kbin.AppendInt64(f.buf, p.logStart)
	}
	f.buf = appendAborted(f.buf, p.aborted, flex)
	if r.version >= 11 {
		f.buf = kbin.AppendInt32(f.buf, p.preferredRead)
	}
	var n int64
	if p.region != nil {
		n = p.region.Len()
	}
	if flex {
		f.buf = kbin.AppendUvarint(f.buf, uint32(n)+1)
	} else {
		f.buf = kbin.AppendInt32(f.buf, int32(n))
	}
	if n > 0 {
		c.s.metrics.bytesOut.WithLabelValues(t.name).Add(float64(n))
		c.s.metrics.recordsOut.WithLabelValues(t.name).Add(float64(regionRecords(p.region)))
		if n < zeroCopyMin {
			b, err := p.region.Bytes()
			if err != nil {
				return err
			}
			f.buf = append(f.buf, b...)
		} else {
			c.s.metrics.zeroCopyBytes.Add(float64(n))
			f.total += int64(len(f.buf)) + n
			f.chunks = append(f.chunks, f.buf, nil)
			f.refs = append(f.refs, [2]int{ti, pi})
			f.buf = make([]byte, 0, 256)
		}
	}
	if flex {
		if d := p.diverging; d != nil {
			// one tagged field: tag 0 DivergingEpoch {epoch int32, end_offset int64, no tags}
			f.buf = append(f.buf, 1, 0, 13)
			f.buf = kbin.AppendInt32(f.buf, d.epoch)
			f.buf = kbin.AppendInt64(f.buf, d.endOffset)
			f.buf = append(f.buf, 0)
		} else {
			f.buf = append(f.buf, 0) // partition tags
		}
	}
	return nil
}

// seal ends the frame: the last chunk, and the size prefix in the first.
func (f *fetchFrame) seal() error {
	f.total += int64(len(f.buf))
	f.chunks = append(f.chunks, f.buf)
	if f.total-4 > math.MaxInt32 {
		// Cannot happen within maxFetchAnswerRecords; never send a size
		// that a client would read as negative.
		return fmt.Errorf("server: fetch answer of %d bytes exceeds the protocol's int32 size", f.total-4)
	}
	binary.BigEndian.PutUint32(f.chunks[0], uint32(f.total-4))
	return nil
}

// send writes the sealed frame f to c: its chunks, and its regions with
// sendfile in between.
func (r *fetchReply) send(c *conn, f *fetchFrame) error {
	ri := 0
	for _, ch := range f.chunks {
		if ch != nil {
			if len(ch) == 0 {
				continue
			}
			if err := c.write(ch); err != nil {
				return err
			}
			continue
		}
		ref := f.refs[ri]
		ri++
		if _, err := r.topics[ref[0]].parts[ref[1]].region.WriteTo(c.io); err != nil {
			return err
		}
	}
	return nil
}

// regionRecords is the number of records in a region's whole batches,
// including those before the fetch offset in its first batch (they go out
// too, as in Kafka), from the offsets the log read; the batch headers are
// not parsed again.
func regionRecords(r plog.Region) int64 {
	if r.Len() == 0 {
		return 0
	}
	return max(r.LastOffset()-r.BaseOffset()+1, 0)
}

func appendArrayLen(dst []byte, n int, flex bool) []byte {
	if flex {
		return kbin.AppendUvarint(dst, uint32(n)+1)
	}
	return kbin.AppendInt32(dst, int32(n))
}

func appendString(dst []byte, s string, flex bool) []byte {
	if flex {
		return kbin.AppendCompactString(dst, s)
	}
	return kbin.AppendString(dst, s)
}
