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
//	        aborted (fetch_txn.go) preferredReadReplica(v11+) records-length | records... | tags(v12)
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
	var (
		chunks [][]byte // byte chunks; a nil entry means "write the next region of refs"
		refs   [][2]int // (topic, partition) index of each region written with sendfile
		total  int64    // frame size including the 4-byte size prefix
	)
	buf := make([]byte, 4, 512)
	buf = appendResponseHeader(buf, hdr, flex)
	buf = kbin.AppendInt32(buf, 0) // throttle
	if r.version >= 7 {
		buf = kbin.AppendInt16(buf, r.errorCode)
		buf = kbin.AppendInt32(buf, r.sessionID)
	}
	buf = appendArrayLen(buf, len(r.topics), flex)
	for ti := range r.topics {
		t := &r.topics[ti]
		buf = appendString(buf, t.name, flex)
		buf = appendArrayLen(buf, len(t.parts), flex)
		for pi := range t.parts {
			p := &t.parts[pi]
			buf = kbin.AppendInt32(buf, p.partition)
			buf = kbin.AppendInt16(buf, p.code)
			buf = kbin.AppendInt64(buf, p.hw)
			buf = kbin.AppendInt64(buf, p.lastStable)
			if r.version >= 5 {
				buf = kbin.AppendInt64(buf, p.logStart)
			}
			buf = appendAborted(buf, p.aborted, flex)
			if r.version >= 11 {
				buf = kbin.AppendInt32(buf, p.preferredRead)
			}
			var n int64
			if p.region != nil {
				n = p.region.Len()
			}
			if flex {
				buf = kbin.AppendUvarint(buf, uint32(n)+1)
			} else {
				buf = kbin.AppendInt32(buf, int32(n))
			}
			if n > 0 {
				c.s.metrics.bytesOut.WithLabelValues(t.name).Add(float64(n))
				c.s.metrics.recordsOut.WithLabelValues(t.name).Add(float64(regionRecords(p.region)))
				if n < zeroCopyMin {
					b, err := p.region.Bytes()
					if err != nil {
						return err
					}
					buf = append(buf, b...)
				} else {
					c.s.metrics.zeroCopyBytes.Add(float64(n))
					total += int64(len(buf)) + n
					chunks = append(chunks, buf, nil)
					refs = append(refs, [2]int{ti, pi})
					buf = make([]byte, 0, 256)
				}
			}
			if flex {
				buf = append(buf, 0) // partition tags
			}
		}
		if flex {
			buf = append(buf, 0) // topic tags
		}
	}
	if flex {
		buf = append(buf, 0) // response tags
	}
	total += int64(len(buf))
	chunks = append(chunks, buf)
	if total-4 > math.MaxInt32 {
		// Cannot happen within maxFetchAnswerRecords; never send a size
		// that a client would read as negative.
		return fmt.Errorf("server: fetch answer of %d bytes exceeds the protocol's int32 size", total-4)
	}
	binary.BigEndian.PutUint32(chunks[0], uint32(total-4))
	ri := 0
	for _, ch := range chunks {
		if ch != nil {
			if len(ch) == 0 {
				continue
			}
			if err := c.write(ch); err != nil {
				return err
			}
			continue
		}
		ref := refs[ri]
		ri++
		if _, err := r.topics[ref[0]].parts[ref[1]].region.WriteTo(c.nc); err != nil {
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
