package audit

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is the broker tier of one broker process: the records its
// partition leaders appended, counted twice, by record time (TierBroker,
// what balances against the producers) and by the broker's clock at the
// append (TierBrokerClock, shown only), and published to _audit every
// interval by a client of the broker's own listener.
//
// A transactional producer's records are held per (partition, producer id)
// until the marker that ends the transaction: counted at COMMIT, dropped
// at ABORT, so the copies of a killed mirror's aborted transaction are not
// counted. Internal topics (`__*`) and _audit itself are never counted.
//
// What it guarantees: a record is counted at most once (each process
// counts under an origin of its own, "node-N/host/pid/random", so a
// restart starts new keys and never adds to the old ones). It may be short
// by the records appended since the last publish before the process died
// (kill -9; a clean shutdown publishes first), and by the records of a
// transaction open across a restart or a leader change (their marker finds
// nothing held). Balance names these as the broker tier's reason. In a
// cluster, a leader counts at its append: records a leader appended and
// then lost to a leader change before they were replicated (an unclean
// election, or acks=1) are counted though the log no longer holds them.
type Broker struct {
	byTime, byClock *Counter
	now             func() time.Time

	mu sync.Mutex
	// Guarded by mu: transactional records not yet committed.
	open map[txnKey][]held
}

type txnKey struct {
	topic     string
	partition int32
	pid       int64
}

type held struct {
	at        time.Time // record time of the batch, or its first window's
	clock     time.Time
	n, bytes  int64
	perRecord []time.Time // record times when the batch spans windows
}

// NewBroker returns the broker tier of node in windows of window.
func NewBroker(node int32, window time.Duration) (*Broker, error) {
	origin := fmt.Sprintf("node-%d/%s", node, NewOrigin())
	t, err := NewCounter(TierBroker, origin, window)
	if err != nil {
		return nil, err
	}
	c, _ := NewCounter(TierBrokerClock, origin, window)
	return &Broker{byTime: t, byClock: c, now: time.Now, open: map[txnKey][]held{}}, nil
}

// Counted reports whether the broker tier counts topic.
func Counted(topic string) bool { return topic != Topic && !strings.HasPrefix(topic, "__") }

// Batch attribute bits.
const (
	attrCodec         = 0x0007
	attrLogAppendTime = 0x0008
	attrTransactional = 0x0010
	attrControl       = 0x0020
)

var decompressor = kgo.DefaultDecompressor()

// Appended counts the batches a leader appended to topic/partition (as
// written: offsets assigned, LogAppendTime stamped). Call it only on the
// partition's leader and only for appends that were not duplicates.
func (b *Broker) Appended(topic string, partition int32, batches []byte) {
	if !Counted(topic) {
		return
	}
	clock := b.now()
	w := b.byTime.Window().Milliseconds()
	for len(batches) >= 61 {
		size := 12 + int64(int32(binary.BigEndian.Uint32(batches[8:])))
		if size < 61 || size > int64(len(batches)) {
			return
		}
		raw := batches[:size]
		batches = batches[size:]
		attrs := int16(binary.BigEndian.Uint16(raw[21:]))
		if attrs&attrControl != 0 {
			continue
		}
		n := int64(int32(binary.BigEndian.Uint32(raw[57:])))
		first := int64(binary.BigEndian.Uint64(raw[27:]))
		maxTs := int64(binary.BigEndian.Uint64(raw[35:]))
		h := held{clock: clock, n: n, bytes: size}
		switch {
		case attrs&attrLogAppendTime != 0:
			h.at = time.UnixMilli(maxTs)
		case first < 0 || maxTs < 0 || first/w == maxTs/w:
			h.at = time.UnixMilli(first)
		default:
			h.perRecord = recordTimes(raw, attrs)
			if h.perRecord == nil { // unreadable: by its first timestamp
				h.at = time.UnixMilli(first)
			}
		}
		if attrs&attrTransactional != 0 {
			pid := int64(binary.BigEndian.Uint64(raw[43:]))
			k := txnKey{topic, partition, pid}
			b.mu.Lock()
			b.open[k] = append(b.open[k], h)
			b.mu.Unlock()
			continue
		}
		b.count(topic, h)
	}
}

func (b *Broker) count(topic string, h held) {
	b.byClock.AddN(topic, h.clock, h.n, h.bytes)
	if h.perRecord == nil {
		b.byTime.AddN(topic, h.at, h.n, h.bytes)
		return
	}
	per := h.bytes / max(int64(len(h.perRecord)), 1)
	for _, ts := range h.perRecord {
		b.byTime.AddN(topic, ts, 1, per)
	}
}

// recordTimes reads the timestamps of a batch's records (nil when the
// batch cannot be read).
func recordTimes(raw []byte, attrs int16) []time.Time {
	var batch kmsg.RecordBatch
	if batch.ReadFrom(raw) != nil {
		return nil
	}
	recs := batch.Records
	if attrs&attrCodec != 0 {
		var err error
		if recs, err = decompressor.Decompress(recs, kgo.CompressionCodecType(attrs&attrCodec)); err != nil {
			return nil
		}
	}
	out := make([]time.Time, 0, batch.NumRecords)
	r := kbin.Reader{Src: recs}
	for i := int32(0); i < batch.NumRecords && r.Ok(); i++ {
		length := r.Varint()
		rr := kbin.Reader{Src: r.Span(int(length))}
		rr.Int8()
		delta := rr.Varlong()
		if !rr.Ok() || !r.Ok() {
			return nil
		}
		out = append(out, time.UnixMilli(batch.FirstTimestamp+delta))
	}
	return out
}

// Marker ends producer pid's transaction on topic/partition: its held
// records are counted (commit) or dropped.
func (b *Broker) Marker(topic string, partition int32, pid int64, commit bool) {
	if !Counted(topic) {
		return
	}
	k := txnKey{topic, partition, pid}
	b.mu.Lock()
	hs := b.open[k]
	delete(b.open, k)
	b.mu.Unlock()
	if !commit {
		return
	}
	for _, h := range hs {
		b.count(topic, h)
	}
}

// Counts returns both counters' cumulative counts (tests).
func (b *Broker) Counts() []Count {
	out := append(b.byTime.Counts(), b.byClock.Counts()...)
	sortCounts(out)
	return out
}

// BrokerReporter publishes a Broker's counts every interval.
type BrokerReporter struct {
	cl       *kgo.Client
	time     *Reporter
	clock    *Reporter
	stopOnce sync.Once
}

// StartBrokerReporter publishes b's counts through a client of options
// client every interval (> 0).
func StartBrokerReporter(b *Broker, client []kgo.Opt, interval time.Duration, log *slog.Logger) (*BrokerReporter, error) {
	cl, err := kgo.NewClient(client...)
	if err != nil {
		return nil, fmt.Errorf("audit: client: %w", err)
	}
	return &BrokerReporter{cl: cl, time: NewReporter(b.byTime, cl, interval, log), clock: NewReporter(b.byClock, cl, interval, log)}, nil
}

// Close publishes what is left and closes the client.
func (r *BrokerReporter) Close(ctx context.Context) error {
	var err error
	r.stopOnce.Do(func() {
		err = r.time.Close(ctx)
		if cerr := r.clock.Close(ctx); err == nil {
			err = cerr
		}
		r.cl.Close()
	})
	return err
}
