package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/acl"
	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/txn"
)

// authzServer is fuzzServer with the authorizer on and ACLs that allow
// the connection's principal (User:ANONYMOUS) some of each request and
// deny the rest: every topic starting with "fu" (ALL), but a DENY of
// WRITE on "fuzz"; READ on every group; DESCRIBE on the cluster. So each
// API's authorization runs both its allowed and its denied paths.
func authzServer(tb testing.TB) (*Server, int64, int16) {
	cfg, err := config.FromProperties(map[string]string{"transaction.state.log.num.partitions": "4",
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
	if err != nil {
		tb.Fatal(err)
	}
	cfg.LogRetentionCheckIntervalMs = 1 << 40
	cfg.FetchMaxBytes = 256 << 10
	s, err := New(Options{DataDir: tb.TempDir(), Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	s.partitionLimit = 4
	tb.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if s.authz == nil {
		tb.Fatal("authorizer.class.name is set but the server has no authorizer")
	}
	anon := "User:ANONYMOUS"
	b := func(typ acl.ResourceType, pt acl.PatternType, name string, op acl.Operation, perm acl.Permission) acl.Binding {
		return acl.Binding{ResourceType: typ, PatternType: pt, ResourceName: name, Principal: anon, Host: "*", Operation: op, Permission: perm}
	}
	if err := s.authz.a.Create([]acl.Binding{
		b(resTopic, kmsg.ACLResourcePatternTypePrefixed, "fu", kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow),
		b(resTopic, kmsg.ACLResourcePatternTypeLiteral, "fuzz", opWrite, kmsg.ACLPermissionTypeDeny),
		b(resGroup, kmsg.ACLResourcePatternTypeLiteral, "*", opRead, kmsg.ACLPermissionTypeAllow),
		b(resCluster, kmsg.ACLResourcePatternTypeLiteral, acl.ClusterName, opDescribe, kmsg.ACLPermissionTypeAllow),
	}); err != nil {
		tb.Fatal(err)
	}
	// The fuzz topic and transaction are made directly: the principal may
	// not create topics (no CREATE) nor write "fuzz".
	if _, code := s.topics.getOrAutoCreate("fuzz", true); code != 0 {
		tb.Fatalf("create topic fuzz: error %d", code)
	}
	init := s.txn.InitProducerID(fuzzTxnID, 60_000, -1, -1)
	if init.ErrorCode != 0 {
		tb.Fatalf("init producer id: error %d", init.ErrorCode)
	}
	codes := s.txn.AddPartitions(fuzzTxnID, init.ProducerID, init.Epoch, []txn.TopicPartition{{Topic: "fuzz", Partition: 0}})
	if code := codes[txn.TopicPartition{Topic: "fuzz", Partition: 0}]; code != 0 {
		tb.Fatalf("open the fuzz transaction on fuzz[0]: error %d", code)
	}
	return s, init.ProducerID, init.Epoch
}

// captureConn keeps what the server writes.
type captureConn struct{ buf *bytes.Buffer }

func (captureConn) Read([]byte) (int, error)         { return 0, net.ErrClosed }
func (c captureConn) Write(b []byte) (int, error)    { return c.buf.Write(b) }
func (captureConn) Close() error                     { return nil }
func (captureConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (captureConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (captureConn) SetDeadline(time.Time) error      { return nil }
func (captureConn) SetReadDeadline(time.Time) error  { return nil }
func (captureConn) SetWriteDeadline(time.Time) error { return nil }

// TestAuthorizedSeedsAnswered: with the authorizer on and part of every
// request denied, each seed request of every served API and version (the
// fuzz seeds) is answered, not dropped, and the answer decodes as that
// API's response (the denied entries merged into the handler's answer keep
// it well formed).
func TestAuthorizedSeedsAnswered(t *testing.T) {
	s, pid, epoch := authzServer(t)
	s.onPanic = func(r any) { t.Fatalf("handler panicked: %v", r) }
	for _, seed := range seedRequestsFor(pid, epoch) {
		r := kbin.Reader{Src: seed}
		key, version := r.Int16(), r.Int16()
		var out bytes.Buffer
		c := newConn(s, captureConn{&out})
		c.cancel()
		err := c.handle(frame{buf: seed, arrived: time.Now()})
		name := kmsg.NameForKey(key)
		if err != nil {
			t.Errorf("%s v%d: %v", name, version, err)
			continue
		}
		if key == 0 && out.Len() == 0 { // acks=0 seeds have no answer
			continue
		}
		b := out.Bytes()
		if len(b) < 8 || int(binary.BigEndian.Uint32(b)) != len(b)-4 {
			t.Errorf("%s v%d: a %d-byte answer with a bad size prefix", name, version, len(b))
			continue
		}
		resp := kmsg.ResponseForKey(key)
		resp.SetVersion(version)
		body := b[8:]
		if resp.IsFlexible() && key != apiVersionsKey {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			t.Errorf("%s v%d: the answer does not decode: %v", name, version, err)
		}
	}
	if got := testutilCount(s); got == 0 {
		t.Fatal("no denial was counted: the seeds never reached a denied path")
	}
}

// testutilCount sums sluice's denial counter.
func testutilCount(s *Server) float64 {
	mfs, err := s.metrics.reg.Gather()
	if err != nil {
		return 0
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "sluice_authorization_denials_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// FuzzRequestAuthorized is FuzzRequest with the authorizer on (authzServer):
// no request, however hostile, makes the authorization step or the merge
// of denied entries into an answer panic, hang or answer out of proportion.
func FuzzRequestAuthorized(f *testing.F) {
	s, pid, epoch := authzServer(f)
	for _, seed := range seedRequestsFor(pid, epoch) {
		f.Add(seed)
		if len(seed) > 12 {
			f.Add(seed[:len(seed)/2])
		}
	}
	f.Fuzz(func(t *testing.T, frameBytes []byte) { handleFrame(t, s, frameBytes) })
}
