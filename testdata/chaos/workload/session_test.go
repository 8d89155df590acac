package workload

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/history"
)

// memberSpoiler is a franz-go dialer that spoils the member id of the
// client's first OffsetCommit (the broker answers UNKNOWN_MEMBER_ID, and
// franz-go rejoins without dropping its partitions) and holds the rejoin's
// JoinGroup back a while, so that the member's next poll returns records
// while the join is under way and their commit waits for it: the path on
// which a commit of records polled in one generation goes out in the next.
type memberSpoiler struct {
	group   string
	spoiled atomic.Bool
	held    atomic.Bool
}

func (m *memberSpoiler) dial(ctx context.Context, network, host string) (net.Conn, error) {
	return dialWrapped(ctx, network, host, func(c net.Conn) net.Conn { return &spoilingConn{Conn: c, m: m} })
}

type spoilingConn struct {
	net.Conn
	m *memberSpoiler
}

// Write sees each request whole (franz-go writes one in one Write).
func (c *spoilingConn) Write(p []byte) (int, error) {
	if len(p) >= 8 {
		key, version := int16(binary.BigEndian.Uint16(p[4:6])), int16(binary.BigEndian.Uint16(p[6:8]))
		switch {
		case key == kmsg.OffsetCommit.Int16() && !c.m.spoiled.Load():
			if spoilMember(p, c.m.group, version >= 8) {
				c.m.spoiled.Store(true)
			}
		case key == kmsg.JoinGroup.Int16() && c.m.spoiled.Load() && c.m.held.CompareAndSwap(false, true):
			time.Sleep(2 * time.Second)
		}
	}
	return c.Conn.Write(p)
}

// spoilMember changes the last byte of an OffsetCommit request's member id
// in place: the body starts group id, generation (int32), member id.
func spoilMember(p []byte, group string, flexible bool) bool {
	i := bytes.Index(p[8:], []byte(group))
	if i < 0 {
		return false
	}
	at := 8 + i + len(group) + 4
	var n int
	if flexible {
		u, w := binary.Uvarint(p[at:])
		if w <= 0 || u < 2 {
			return false
		}
		n, at = int(u-1), at+w
	} else {
		n, at = int(binary.BigEndian.Uint16(p[at:])), at+2
	}
	if n == 0 || at+n > len(p) {
		return false
	}
	p[at+n-1] ^= 1
	return true
}

// A group member's commit is sent only under the session its records
// were polled in: after a commit answered UNKNOWN_MEMBER_ID, the records
// the member polls while it rejoins are not committed under the next
// generation (ErrSessionChanged, recorded failed), and the history is
// clean.
func TestCommitRefusedAcrossARejoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, group = "rejoin", "rejoin-group"
	addr := startBroker(t, topic, 1)
	rec := history.NewRecorder(nil)
	p, err := NewProducer(rec, ProducerConfig{Bootstrap: addr, Topic: topic, Process: 1, Idempotent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Run(ctx, 1000) // polled a few at a time (FetchMaxBytes), across the rejoin
	spoiler := &memberSpoiler{group: group}
	refused := func() bool {
		for _, op := range rec.History() {
			if op.Kind == history.Commit && strings.Contains(op.Error, ErrSessionChanged.Error()) {
				return true
			}
		}
		return false
	}
	afterHeld, afterRefused := 0, 0 // polls since the join was held, since a commit was refused
	err = ConsumeGroup(ctx, rec, GroupConfig{Bootstrap: addr, Topic: topic, Group: group, Process: 2,
		Options: []kgo.Opt{kgo.Dialer(spoiler.dial), kgo.FetchMaxBytes(512), kgo.FetchMaxPartitionBytes(512)},
		Until: func(int) bool {
			if spoiler.held.Load() {
				afterHeld++
			}
			if refused() {
				afterRefused++
			}
			return afterRefused > 3 || afterHeld > 40
		}})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("timed out (member id spoiled: %v, join held: %v, a commit refused: %v)", spoiler.spoiled.Load(), spoiler.held.Load(), refused())
	}
	if _, err := FinalRead(ctx, rec, 3, addr, topic); err != nil {
		t.Fatal(err)
	}
	h := checkClean(t, rec)
	var unknownMember, okAfter int
	seenRefused := false
	for _, op := range h {
		if op.Kind != history.Commit {
			continue
		}
		switch {
		case strings.Contains(op.Error, "UNKNOWN_MEMBER_ID"):
			unknownMember++
		case strings.Contains(op.Error, ErrSessionChanged.Error()):
			seenRefused = true
		case op.Outcome == history.OK && seenRefused:
			okAfter++
		}
	}
	if unknownMember == 0 || !seenRefused || okAfter == 0 {
		t.Fatalf("want a commit answered UNKNOWN_MEMBER_ID, then one refused before it was sent, then ok commits; got %d, %v, %d:\n%s",
			unknownMember, seenRefused, okAfter, history.Check(h).Report(h, 0))
	}
}
