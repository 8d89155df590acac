package server

// Hostile input before authentication, and certificate reload (issue 22).

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"maps"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/testdata/harness/tlscerts"
)

// withProps is securityProps with extra properties.
func withProps(pki *tlscerts.PKI, extra map[string]string) map[string]string {
	p := securityProps(pki)
	maps.Copy(p, extra)
	return p
}

// saslHandshake sends SaslHandshake v1 for mechanism on rc and checks the answer.
func saslHandshake(t *testing.T, rc *rawConn, mechanism string, corr int32) {
	t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.SetVersion(1)
	req.Mechanism = mechanism
	rc.send(encodeRequest(req, corr))
	b, ok := rc.recv()
	if !ok {
		t.Fatal("SaslHandshake: connection closed")
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(b[4:]); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake %s: err %v, code %d", mechanism, err, resp.ErrorCode)
	}
}

// TestSecurityOversizedSASLToken: a frame above sasl.server.max.receive.size
// before authentication (a SaslAuthenticate token, and a bare token after
// SaslHandshake v0) closes the connection, and the broker allocates no
// buffer for it although the client sends every byte it announced; the
// broker then authenticates others.
func TestSecurityOversizedSASLToken(t *testing.T) {
	const limit = 4096
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, withProps(pki, map[string]string{"sasl.server.max.receive.size": "4096"}))
	ss.addUser(t, "alice", "alice-secret")
	addr := ss.addrs["SASL_PLAINTEXT"]

	const conns, announced = 8, 8 << 20 // each would be 8 MiB read into a frame buffer without the cap
	payload := make([]byte, announced)
	var closedEarly int
	alloc := allocatedDuring(func() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range conns {
			rc := dialRaw(t, addr)
			if i%2 == 0 {
				saslHandshake(t, rc, "PLAIN", 1)
			} else { // v0: the next frame is a bare token
				req := kmsg.NewPtrSASLHandshakeRequest()
				req.SetVersion(0)
				req.Mechanism = "PLAIN"
				rc.send(encodeRequest(req, 1))
				if _, ok := rc.recv(); !ok {
					t.Fatal("SaslHandshake v0: connection closed")
				}
			}
			var head []byte
			if i%2 == 0 { // SaslAuthenticate v1 whose token makes the frame 8 MiB
				head = kbin.AppendInt16(nil, 36)
				head = kbin.AppendInt16(head, 1)
				head = kbin.AppendInt32(head, 2)
				head = kbin.AppendNullableString(head, kmsg.StringPtr("raw-test"))
				head = kbin.AppendInt32(head, int32(announced-len(head)-4))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				frame := kbin.AppendInt32(nil, int32(announced))
				_, werr := rc.nc.Write(append(frame, head...))
				if werr == nil {
					_, werr = rc.nc.Write(payload[len(head):])
				}
				_, rerr := rc.nc.Read(make([]byte, 1))
				mu.Lock()
				defer mu.Unlock()
				if werr != nil { // the broker closed before the body was sent
					closedEarly++
				}
				if rerr == nil {
					t.Errorf("connection %d: an answer to an oversized pre-authentication frame", i)
				} else if ne, ok := rerr.(net.Error); ok && ne.Timeout() {
					t.Errorf("connection %d: still open after a %d-byte frame (sasl.server.max.receive.size=%d)", i, announced, limit)
				}
			}()
		}
		wg.Wait()
	})
	t.Logf("%d connections announcing %d bytes each: %d bytes allocated by the process, %d closed before the body was sent", conns, announced, alloc, closedEarly)
	if alloc > conns*announced/8 {
		t.Fatalf("%d bytes allocated for %d oversized pre-authentication frames of %d bytes (cap %d)", alloc, conns, announced, limit)
	}
	if err := roundTripRecords(t, addr, "after-oversized", 3, scramOpt("SCRAM-SHA-512", "alice", "alice-secret")); err != nil {
		t.Fatalf("after the oversized tokens: %v", err)
	}
}

// TestSecurityHandshakeNeverFinished: a connection that stops half-way
// (after SaslHandshake; after ApiVersions alone; a TLS port given no
// ClientHello; a SASL_SSL port given TLS but no SASL) is closed by the
// broker after sasl.handshake.timeout.ms, while an authenticated
// connection opened at the same time stays usable.
func TestSecurityHandshakeNeverFinished(t *testing.T) {
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, withProps(pki, map[string]string{"sasl.handshake.timeout.ms": "300"}))
	ss.addUser(t, "alice", "alice-secret")
	good := newClient(t, ss.addrs["SASL_PLAINTEXT"], scramOpt("SCRAM-SHA-512", "alice", "alice-secret"))
	if err := good.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	halfSASL := dialRaw(t, ss.addrs["SASL_PLAINTEXT"])
	saslHandshake(t, halfSASL, "SCRAM-SHA-512", 1)
	onlyVersions := dialRaw(t, ss.addrs["SASL_PLAINTEXT"])
	onlyVersions.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
	if _, ok := onlyVersions.recv(); !ok {
		t.Fatal("ApiVersions before authentication: connection closed")
	}
	noHello := dialRaw(t, ss.addrs["SSL"])
	tlsNoSASL := dialTLS(t, ss, "SASL_SSL")
	deadline := time.Now().Add(15 * time.Second) // 50 times the timeout
	for name, nc := range map[string]net.Conn{"after SaslHandshake": halfSASL.nc, "after ApiVersions": onlyVersions.nc,
		"no ClientHello": noHello.nc, "TLS without SASL": tlsNoSASL} {
		_ = nc.SetReadDeadline(deadline)
		n, err := nc.Read(make([]byte, 1))
		if n > 0 || err == nil {
			t.Errorf("%s: got data, want the connection closed", name)
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: still open 15 s after accept, sasl.handshake.timeout.ms=300", name)
		}
	}
	if err := good.Ping(testCtx(t)); err != nil {
		t.Fatalf("the authenticated connection after the timeouts: %v", err)
	}
}

// TestSecurityTLSHandshakeWithoutTimeout: with sasl.handshake.timeout.ms=0
// (no authentication deadline) a TLS port given no ClientHello is still
// closed, after connections.max.idle.ms, as an idle connection is.
func TestSecurityTLSHandshakeWithoutTimeout(t *testing.T) {
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, withProps(pki, map[string]string{"sasl.handshake.timeout.ms": "0", "connections.max.idle.ms": "300"}))
	for _, listener := range []string{"SSL", "SASL_SSL"} {
		nc := dialRaw(t, ss.addrs[listener]).nc
		_ = nc.SetReadDeadline(time.Now().Add(15 * time.Second)) // 50 times connections.max.idle.ms
		n, err := nc.Read(make([]byte, 1))
		if n > 0 || err == nil {
			t.Errorf("%s: got data, want the connection closed", listener)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("%s: no ClientHello, still open 15 s after accept (sasl.handshake.timeout.ms=0, connections.max.idle.ms=300)", listener)
		}
	}
	good := newClient(t, ss.addrs["SSL"], kgo.DialTLSConfig(ss.tlsConfig(t, nil)))
	if err := good.Ping(testCtx(t)); err != nil {
		t.Fatalf("a TLS client after the idle ones: %v", err)
	}
}

func dialTLS(t *testing.T, ss *secureServer, listener string) *tls.Conn {
	t.Helper()
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ss.addrs[listener], ss.tlsConfig(t, nil))
	if err != nil {
		t.Fatalf("%s: TLS handshake: %v", listener, err)
	}
	t.Cleanup(func() { tc.Close() })
	return tc
}

// TestSecurityRequestsBeforeAuthentication: on a SASL listener every
// request but ApiVersions, SaslHandshake and SaslAuthenticate closes the
// connection unanswered, and none of them has an effect (no topic is
// created or deleted, no user added).
func TestSecurityRequestsBeforeAuthentication(t *testing.T) {
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, securityProps(pki))
	adm := kadm.NewClient(newClient(t, ss.addrs["PLAINTEXT"]))
	if _, err := adm.CreateTopic(testCtx(t), 1, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	create := kmsg.NewPtrCreateTopicsRequest()
	create.SetVersion(4)
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "made-before-auth", 1, 1
	create.Topics = append(create.Topics, ct)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(3)
	del.TopicNames = []string{"kept"}
	scram := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "mallory", 2, 4096, []byte("salt"), make([]byte, 64)
	scram.Upsertions = append(scram.Upsertions, up)
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(4)
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(7)
	produce.Acks = 1
	produce.TimeoutMillis = 1000
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(4)
	fetch.MaxBytes = 1 << 20
	reqs := []kmsg.Request{meta, create, del, scram, produce, fetch, kmsg.NewPtrFindCoordinatorRequest(), kmsg.NewPtrListOffsetsRequest()}
	for _, listener := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
		for _, req := range reqs {
			var c net.Conn
			if listener == "SASL_SSL" {
				c = dialTLS(t, ss, listener)
			} else {
				c = dialRaw(t, ss.addrs[listener]).nc
			}
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			rc := &rawConn{t: t, nc: c}
			// ApiVersions first, as clients do: answered.
			rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
			if _, ok := rc.recv(); !ok {
				t.Fatalf("%s: ApiVersions before authentication: connection closed", listener)
			}
			rc.send(encodeRequest(req, 2))
			if b, ok := rc.recv(); ok {
				t.Errorf("%s: %T before authentication answered (%d bytes), want the connection closed", listener, req, len(b))
			}
		}
	}
	topics, err := adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("kept") || topics.Has("made-before-auth") {
		t.Fatalf("requests before authentication had an effect: topics %v", topics.Names())
	}
	users, err := adm.DescribeUserSCRAMs(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := users["mallory"]; ok {
		t.Fatal("AlterUserScramCredentials before authentication added a user")
	}
}

// TestSecurityThousandUnauthenticatedConnections: 1,000 connections to
// the SASL_PLAINTEXT and SASL_SSL listeners, each having sent ApiVersions
// (and TLS for SASL_SSL) and then nothing, cost the broker less than
// 64 KiB of heap and stack each and a bounded number of goroutines, and are
// all closed by sasl.handshake.timeout.ms; the goroutines then return.
func TestSecurityThousandUnauthenticatedConnections(t *testing.T) {
	const n, tlsShare = 1000, 100 // tlsShare of them over SASL_SSL
	const timeoutMs = 15000       // long enough that none is closed before the measurement
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, withProps(pki, map[string]string{"sasl.handshake.timeout.ms": "15000"}))
	ss.addUser(t, "alice", "alice-secret")
	measure := func() (heap uint64, goroutines int) {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.StackInuse, runtime.NumGoroutine()
	}
	heap0, g0 := measure()
	started := time.Now()
	conns := make([]net.Conn, 0, n)
	for i := range n {
		var c net.Conn
		if i < tlsShare {
			c = dialTLS(t, ss, "SASL_SSL")
		} else {
			c = dialRaw(t, ss.addrs["SASL_PLAINTEXT"]).nc
		}
		_ = c.SetDeadline(started.Add(6 * timeoutMs * time.Millisecond))
		rc := &rawConn{t: t, nc: c}
		rc.send(encodeRequest(kmsg.NewPtrApiVersionsRequest(), 1))
		if _, ok := rc.recv(); !ok {
			t.Fatalf("connection %d: ApiVersions not answered", i)
		}
		conns = append(conns, c)
	}
	heap1, g1 := measure()
	opened := time.Since(started)
	if opened > timeoutMs*time.Millisecond/2 {
		t.Fatalf("opening %d connections took %v, over half of sasl.handshake.timeout.ms: the measurement would miss closed ones", n, opened)
	}
	perConn := (int64(heap1) - int64(heap0)) / n
	perGoroutines := float64(g1-g0) / n
	t.Logf("%d unauthenticated connections (%d over TLS), opened in %v: %d bytes of heap+stack each (client side included), %.2f goroutines each", n, tlsShare, opened.Round(time.Millisecond), perConn, perGoroutines)
	if perConn > 64<<10 {
		t.Errorf("%d bytes per unauthenticated connection, want < 64 KiB", perConn)
	}
	if perGoroutines > 4 {
		t.Errorf("%.2f goroutines per unauthenticated connection, want <= 4", perGoroutines)
	}
	// The broker still authenticates and serves a client while they are held.
	if err := roundTripRecords(t, ss.addrs["SASL_SSL"], "while-held", 3, kgo.DialTLSConfig(ss.tlsConfig(t, nil)), scramOpt("SCRAM-SHA-512", "alice", "alice-secret")); err != nil {
		t.Fatalf("with %d unauthenticated connections held: %v", n, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Fatalf("%d of %d unauthenticated connections still open 6 times sasl.handshake.timeout.ms after the first was accepted (sasl.handshake.timeout.ms=%d)", open, n, timeoutMs)
	}
	for _, c := range conns {
		c.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, g := measure()
		if g <= g0+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 30 s after the connections were closed, %d before they were opened", g, g0)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSecurityCertificateReload: the server certificate file is replaced
// by a renewal (a new serial number); the next TLS handshake on each TLS
// listener sees the new certificate without a restart, a connection opened
// before goes on working, and a broken replacement keeps the last good
// certificate in use.
func TestSecurityCertificateReload(t *testing.T) {
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, securityProps(pki))
	alice := pki.Client(t, "alice")
	listeners := map[string]*tls.Config{"SSL": ss.tlsConfig(t, nil), "SASL_SSL": ss.tlsConfig(t, nil), "MTLS": ss.tlsConfig(t, &alice)}
	served := func(listener string) string {
		t.Helper()
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ss.addrs[listener], listeners[listener])
		if err != nil {
			t.Fatalf("%s: handshake: %v", listener, err)
		}
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			t.Fatalf("%s: handshake: %v", listener, err)
		}
		return tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serialOf(t, pki.ServerFile)
	for l := range listeners {
		if got := served(l); got != first {
			t.Fatalf("%s serves serial %s, the file holds %s", l, got, first)
		}
	}
	before := newClient(t, ss.addrs["SSL"], kgo.DialTLSConfig(ss.tlsConfig(t, nil)))
	if err := before.Ping(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	renewed, _, _ := pki.Server(t, "server-renewed")
	second := serialOf(t, renewed)
	if second == first {
		t.Fatal("the renewal has the old serial number")
	}
	replaceFile(t, renewed, pki.ServerFile)
	for l := range listeners {
		if got := served(l); got != second {
			t.Errorf("%s after the renewal serves serial %s, want the renewed %s (the old one is %s)", l, got, second, first)
		}
	}
	if err := before.Ping(testCtx(t)); err != nil {
		t.Fatalf("a connection opened before the renewal: %v", err)
	}
	if err := roundTripRecords(t, ss.addrs["SSL"], "after-renewal", 3, kgo.DialTLSConfig(ss.tlsConfig(t, nil))); err != nil {
		t.Fatalf("a client after the renewal: %v", err)
	}

	broken := pki.Dir + "/broken.pem"
	if err := os.WriteFile(broken, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	replaceFile(t, broken, pki.ServerFile)
	for l := range listeners {
		if got := served(l); got != second {
			t.Errorf("%s after a broken replacement serves serial %s, want the last good %s", l, got, second)
		}
	}
}

// replaceFile renames from over to, as certificate renewal tools do
// (atomically: a handshake never reads half a file).
func replaceFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// serialOf is the serial number of the first certificate in a PEM file.
func serialOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s: no certificate", path)
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c.SerialNumber.String()
		}
	}
}
