package chaos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	blog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
)

// What acks=all promises on one broker, by fault (the README's testing
// section says the same):
//
//   - a process kill (kill -9) loses nothing acknowledged, with any flush
//     policy: the appended bytes are in the page cache, which outlives the
//     process (TestBrokerKillPause);
//   - a power loss, simulated here by vfs.Mem's Crash (what was not synced
//     is gone), loses nothing with flush.messages=1, and with the default
//     (leave it to the page cache) may lose what was acknowledged after the
//     last flush — and nothing else: no record before it, no record
//     changed, none served twice.
//
// Each round appends to a partition log on the crash file system, flushes
// now and then, loses power at a seeded point, recovers, and reads the
// whole log back; the history of acknowledgements and that final read goes
// to the checker.
func TestBrokerPowerLoss(t *testing.T) {
	for _, policy := range []struct {
		name  string
		flush int64
	}{{"flush-messages-1", 1}, {"flush-default", 0}} {
		t.Run(policy.name, func(t *testing.T) {
			r := harness.NewRun(t, "broker-power-loss-"+policy.name, time.Second)
			rec, closeHistory := newHistory(t, r)
			st := newStamps(rec)
			rounds := 0
			unflushedValues := map[string]bool{}
			var unflushedLost, lost int
			deadline := time.Now().Add(r.Duration)
			for process := 1; rounds < 40 || (r.Long && time.Now().Before(deadline)); process++ {
				u, f := powerLossRound(t, rec, process, r, policy.flush, unflushedValues)
				unflushedLost += u
				lost += f
				rounds++
			}
			st.close()
			closeHistory()
			h := rec.History()
			res := history.Check(h)
			// The default policy may lose the acknowledged tail after the last
			// flush: those lost anomalies are the promise, not a breach.
			var kept []history.Anomaly
			allowed := 0
			for _, a := range res.Anomalies {
				if a.Kind == history.Lost && policy.flush == 0 && allUnflushed(h, a.Ops, unflushedValues) {
					allowed++
					continue
				}
				kept = append(kept, a)
			}
			res.Anomalies = kept
			r.Note("power", "rounds", fmt.Sprintf("%d rounds, %d acknowledged records lost after their last flush", rounds, allowed))
			report(t, r, nil, h, res, st, harness.Report{History: historyPath(r), Notes: []string{
				"power loss (vfs.Mem Crash) at a seeded point of each round",
				fmt.Sprintf("flush.messages=%d (0: page cache); unflushed acknowledged records lost: %d", policy.flush, allowed),
			}})
			if policy.flush == 1 && unflushedLost != 0 {
				t.Errorf("flush.messages=1 left %d acknowledged records unflushed", unflushedLost)
			}
			if policy.flush == 0 && allowed == 0 {
				t.Errorf("no unflushed record was lost in %d rounds: the crash file system did not simulate a power loss", rounds)
			}
		})
	}
}

// allUnflushed reports whether every produce among ids was acknowledged
// after the log's last flush before the crash (so power may take it).
func allUnflushed(h history.History, ids []int, unflushed map[string]bool) bool {
	for _, id := range ids {
		if op := h[id]; op.Kind == history.Produce && !unflushed[op.Value] {
			return false
		}
	}
	return true
}

// powerLossRound appends records on a fresh crash file system, loses power,
// recovers and reads back; it returns how many acknowledged records were
// not flushed at the crash, and how many of all were not read back.
func powerLossRound(t *testing.T, rec *history.Recorder, process int, r *harness.Run, flush int64, unflushedValues map[string]bool) (unflushed, missing int) {
	t.Helper()
	mem := vfs.NewMem()
	tp := blog.TopicPartition{Topic: fmt.Sprintf("pl%d", process), Partition: 0} // a log per round
	cfg := blog.DefaultConfig()
	cfg.FlushMessages = flush
	cfg.SegmentBytes = 4096
	m, err := blog.OpenManager(blog.ManagerOptions{FS: mem, Dir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Open(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 20 + r.Rand.Intn(200)
	var acked []pendingAck
	flushedThrough := 0 // acked[:flushedThrough] were flushed
	for i := 0; i < n; i++ {
		value := fmt.Sprintf("%d-%d", process, i)
		p := rec.Invoke(process, history.Produce)
		res, err := l.Append(oneRecordBatch(value, time.Now().UnixMilli()), blog.AppendOptions{AssignOffsets: true})
		if err != nil {
			p.Complete(history.Op{Outcome: history.Fail, Topic: tp.Topic, Partition: tp.Partition, Offset: -1, Value: value, Error: err.Error()})
			continue
		}
		acked = append(acked, pendingAck{p: p, value: value, offset: res.BaseOffset})
		if flush == 1 {
			flushedThrough = len(acked)
		} else if r.Rand.Intn(25) == 0 {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			flushedThrough = len(acked)
		}
	}
	mem.Crash() // power loss: open handles fail, the unsynced is gone
	for i, a := range acked {
		op := history.Op{Outcome: history.OK, Topic: tp.Topic, Partition: tp.Partition, Offset: a.offset, Value: a.value}
		if i >= flushedThrough {
			unflushedValues[a.value] = true
		}
		a.p.Complete(op)
	}
	unflushed = len(acked) - flushedThrough
	m2, err := blog.OpenManager(blog.ManagerOptions{FS: mem, Dir: "/data"})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	l2, err := m2.Open(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := rec.Invoke(process, history.FinalRead)
	recs, err := readAll(l2, tp)
	if err != nil {
		p.Complete(history.Op{Outcome: history.Fail, Error: err.Error()})
		t.Fatal(err)
	}
	end := l2.LogEndOffset()  // the read reached the log's end: nothing lies beyond it,
	for _, a := range acked { // so it covers every offset ever acknowledged too
		end = max(end, a.offset+1)
	}
	p.Complete(history.Op{Outcome: history.OK, Records: recs,
		Ranges: []history.Range{{Topic: tp.Topic, Partition: tp.Partition, Start: 0, End: end}}})
	return unflushed, len(acked) - len(recs)
}

type pendingAck struct {
	p      history.Pending
	value  string
	offset int64
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// oneRecordBatch is a RecordBatch v2 of one uncompressed record.
func oneRecordBatch(value string, ts int64) []byte {
	var rec []byte
	body := []byte{0}                    // attributes
	body = binary.AppendVarint(body, 0)  // timestamp delta
	body = binary.AppendVarint(body, 0)  // offset delta
	body = binary.AppendVarint(body, -1) // no key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	rec = binary.AppendVarint(rec, int64(len(body)))
	rec = append(rec, body...)
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: rec}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// readAll reads the whole log back as records (one per batch, as written).
func readAll(l *blog.Log, tp blog.TopicPartition) ([]history.Record, error) {
	var out []history.Record
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		reg, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			return nil, err
		}
		b, err := reg.Bytes()
		reg.Close()
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("empty read at %d below the log end %d", off, l.LogEndOffset())
		}
		for len(b) >= 61 {
			size := 12 + int(binary.BigEndian.Uint32(b[8:]))
			if size > len(b) || size < 61 {
				return nil, errors.New("a torn batch served")
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b[:size]); err != nil {
				return nil, err
			}
			value, err := recordValue(rb.Records)
			if err != nil {
				return nil, err
			}
			out = append(out, history.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: rb.FirstOffset, Value: value})
			off = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			b = b[size:]
		}
	}
	return out, nil
}

// recordValue is the value of the one record oneRecordBatch wrote.
func recordValue(raw []byte) (string, error) {
	bad := errors.New("a record not as written")
	if _, n := binary.Varint(raw); n <= 0 {
		return "", bad
	} else {
		raw = raw[n:]
	}
	if len(raw) < 1 {
		return "", bad
	}
	raw = raw[1:]            // attributes
	for i := 0; i < 3; i++ { // timestamp delta, offset delta, key length (-1)
		_, n := binary.Varint(raw)
		if n <= 0 {
			return "", bad
		}
		raw = raw[n:]
	}
	vlen, n := binary.Varint(raw)
	if n <= 0 || vlen < 0 || int(vlen) > len(raw)-n {
		return "", bad
	}
	return string(raw[n : n+int(vlen)]), nil
}
