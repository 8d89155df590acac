package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// What the coordinator holds is counted in bytes, so that no client can
// make it hold without bound (doc.go, "Bounds"):
//
//	member  ids, client id and host, protocol type, every protocol's name
//	        and metadata, the assignment            (+ memberOverhead)
//	pending a member id handed out with MEMBER_ID_REQUIRED (+ pendingOverhead)
//	offset  topic, commit metadata                  (+ offsetOverhead)
//	group   group id (+ groupOverhead, which covers its protocol type,
//	        protocol and leader: at most maxNameBytes, maxNameBytes and
//	        maxLeaderID bytes)
//
// A group's members and pending ids are bounded by
// Options.MaxGroupMetadataBytes; everything of every group together by
// Options.MaxCoordinatorBytes. The overheads are rough sizes of the Go
// structures and map entries, so that a flood of tiny entries is counted too.
const (
	memberOverhead  = 256
	pendingOverhead = 64
	offsetOverhead  = 96
	groupOverhead   = 1024
	// maxNameBytes bounds a protocol type and a protocol name (Kafka's are
	// unbounded; real ones, such as "consumer" or "cooperative-sticky",
	// are short).
	maxNameBytes = 255
)

// Bounds on the group record of __consumer_offsets: a RecordBatch v2 of one
// record (recordBatchOverhead: the batch header, the record's framing and
// the key's version and length fields) holding a GroupMetadataValue v3
// (groupValueOverhead: version, protocol type and protocol lengths,
// generation, leader, state timestamp, member count) with one entry per
// member (memberValueOverhead: six length fields and two timeouts).
const (
	recordBatchOverhead = 61 + 32
	// recordOverhead bounds one record's framing in a batch beyond its key
	// and value (length, attributes, deltas, key and value lengths,
	// headers).
	recordOverhead      = 5 + 1 + 10 + 5 + 5 + 5 + 5
	groupValueOverhead  = 2 + 2 + 4 + 2 + 2 + 8 + 4
	memberValueOverhead = 2 + 2 + 2 + 2 + 4 + 4 + 4 + 4
	// maxLeaderID bounds the leader's member id in the record (ids sluice
	// hands out are at most 237 bytes: a 200-byte prefix and a uuid).
	maxLeaderID = 256
)

// memory is the coordinator-wide count of bytes held. Guarded by
// Coordinator.mu.
type memory struct{ used int64 }

// size is what m holds, as counted against the bounds.
func (m *member) size() int64 {
	n := memberOverhead + len(m.id) + len(m.instanceID) + len(m.clientID) + len(m.clientHost) + len(m.protocolType) + len(m.assignment)
	for _, p := range m.protocols {
		n += len(p.name) + len(p.metadata)
	}
	return int64(n)
}

// recordSize bounds m's entry in the group record: the subscription is one
// protocol's metadata, which is at most the largest.
func (m *member) recordSize() int64 {
	meta := 0
	for _, p := range m.protocols {
		meta = max(meta, len(p.metadata))
	}
	return int64(memberValueOverhead + len(m.id) + len(m.instanceID) + len(m.clientID) + len(m.clientHost) + meta + len(m.assignment))
}

func pendingSize(id string) int64 { return int64(pendingOverhead + len(id)) }

func offsetSize(tp topicPartition, o committed) int64 {
	return int64(offsetOverhead + len(tp.topic) + len(o.metadata))
}

// footprint is everything g holds.
func (g *group) footprint() int64 {
	return groupOverhead + int64(len(g.id)) + g.memberBytes + g.offsetBytes
}

// account brings m's counted size up to date after m joined or its
// protocols, client or assignment changed.
func (g *group) account(m *member) {
	d, r := m.size()-m.bytes, m.recordSize()-m.recordBytes
	m.bytes += d
	m.recordBytes += r
	g.memberBytes += d
	g.recordBytes += r
	g.mem.used += d
}

// unaccount removes m's count (m left the group).
func (g *group) unaccount(m *member) {
	g.memberBytes -= m.bytes
	g.recordBytes -= m.recordBytes
	g.mem.used -= m.bytes
	m.bytes, m.recordBytes = 0, 0
}

func (g *group) addPending(id string, expiry time.Time) {
	if _, ok := g.pending[id]; !ok {
		n := pendingSize(id)
		g.memberBytes += n
		g.mem.used += n
	}
	g.pending[id] = expiry
}

func (g *group) dropPending(id string) {
	if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		n := pendingSize(id)
		g.memberBytes -= n
		g.mem.used -= n
	}
}

func (g *group) setOffset(tp topicPartition, o committed) {
	if old, ok := g.offsets[tp]; ok {
		g.offsetBytes -= offsetSize(tp, old)
		g.mem.used -= offsetSize(tp, old)
	}
	g.offsets[tp] = o
	g.offsetBytes += offsetSize(tp, o)
	g.mem.used += offsetSize(tp, o)
}

func (g *group) dropOffset(tp topicPartition) {
	if old, ok := g.offsets[tp]; ok {
		delete(g.offsets, tp)
		g.offsetBytes -= offsetSize(tp, old)
		g.mem.used -= offsetSize(tp, old)
	}
}

// groupBatchBound bounds the size of the batch holding group id's record
// whose value is at most value bytes.
func groupBatchBound(id string, value int64) int64 {
	return recordBatchOverhead + int64(len(id)) + value
}

// refusal says why a join or an assignment does not fit: the Kafka error
// code the client gets and the bound, for the broker's log.
type refusal struct {
	code  int16
	bound string // the property that bounds it
	need  int64  // the bytes (or members) it would take
	limit int64
}

// admit checks that cand may join g in place of old (nil for a new member):
// the group's member metadata stays within Options.MaxGroupMetadataBytes,
// the coordinator's bytes within Options.MaxCoordinatorBytes, and the group
// record within the offsets topic's largest batch. ok is true when it fits.
func (c *Coordinator) admit(g *group, cand, old *member) (refusal, bool) {
	var oldBytes, oldRecord int64
	if old != nil {
		oldBytes, oldRecord = old.bytes, old.recordBytes
	}
	size := cand.size()
	if need := g.memberBytes - oldBytes + size; need > c.opts.MaxGroupMetadataBytes {
		return refusal{kerr.MessageTooLarge.Code, "group.max.metadata.bytes", need, c.opts.MaxGroupMetadataBytes}, false
	}
	if need := c.mem.used - oldBytes + size; size > oldBytes && need > c.opts.MaxCoordinatorBytes {
		return refusal{kerr.MessageTooLarge.Code, "group.coordinator.max.bytes", need, c.opts.MaxCoordinatorBytes}, false
	}
	if limit := int64(c.opts.Storage.MaxBatchBytes()); limit > 0 {
		longest := max(len(g.protocolType), len(cand.protocolType))
		name := 0
		for _, p := range cand.protocols {
			name = max(name, len(p.name))
		}
		value := groupValueOverhead + int64(longest+name+maxLeaderID) + g.recordBytes - oldRecord + cand.recordSize()
		if need := groupBatchBound(g.id, value); need > limit {
			return refusal{kerr.MessageTooLarge.Code, "max.message.bytes of " + OffsetsTopic, need, limit}, false
		}
	}
	return refusal{}, true
}
