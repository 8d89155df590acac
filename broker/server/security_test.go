package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/testdata/harness/tlscerts"
)

// secureServer is a server with several listeners, each on a free port.
type secureServer struct {
	*Server
	addrs map[string]string // listener name -> bound address
	pki   *tlscerts.PKI
}

// securityProps are the listeners of the security tests: one of each
// protocol, and MTLS (SSL with client certificates required).
func securityProps(pki *tlscerts.PKI) map[string]string {
	return map[string]string{
		"listeners":                                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
		"listener.security.protocol.map":                 "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
		"sasl.enabled.mechanisms":                        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"ssl.keystore.type":                              "PEM",
		"ssl.keystore.location":                          pki.ServerFile,
		"ssl.truststore.type":                            "PEM",
		"ssl.truststore.location":                        pki.CAFile,
		"listener.name.mtls.ssl.client.auth":             "required",
		"listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=clients,.*$/$1/L,DEFAULT",
	}
}

func startSecureServer(t testing.TB, pki *tlscerts.PKI, props map[string]string) *secureServer {
	t.Helper()
	cfg, err := config.FromProperties(props)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{DataDir: t.TempDir(), Config: cfg, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	ss := &secureServer{Server: s, addrs: map[string]string{}, pki: pki}
	for _, l := range cfg.Security.Listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			t.Fatal(err)
		}
		ss.addrs[l.Name] = ln.Addr().String()
		go func() { _ = s.ServeListener(ln, l.Name) }()
	}
	t.Cleanup(func() { (&testServer{Server: s}).stop(t) })
	return ss
}

// addUser creates a SCRAM-SHA-512 and a SCRAM-SHA-256 credential over the
// PLAINTEXT listener with kadm (AlterUserScramCredentials).
func (ss *secureServer) addUser(t testing.TB, user, password string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, ss.addrs["PLAINTEXT"]))
	res, err := adm.AlterUserSCRAMs(testCtx(t), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password},
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("alter SCRAM credentials: %v", err)
	}
}

func (ss *secureServer) tlsConfig(t testing.TB, client *tlscerts.Client) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(ss.pki.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if client != nil {
		cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c
}

// roundTripRecords produces n records to topic through cl and reads them
// back through a second client with the same options; it returns the first
// error.
func roundTripRecords(t testing.TB, addr, topic string, n int, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RetryTimeout(5 * time.Second), kgo.AllowAutoTopicCreation()}, opts...)
	p, err := kgo.NewClient(base...)
	if err != nil {
		return err
	}
	defer p.Close()
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("v", i+1))}).FirstErr(); err != nil {
			return err
		}
	}
	c, err := kgo.NewClient(append(base, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer c.Close()
	got := 0
	for got < n {
		fs := c.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != got+1 {
				t.Errorf("record %d: %d bytes, want %d", got, len(r.Value), got+1)
			}
			got++
		})
	}
	return nil
}

func scramOpt(mech, user, password string) kgo.Opt {
	a := scram.Auth{User: user, Pass: password}
	if mech == "SCRAM-SHA-256" {
		return kgo.SASL(a.AsSha256Mechanism())
	}
	return kgo.SASL(a.AsSha512Mechanism())
}

// TestSecurityFranzGo: franz-go produces and consumes over SSL, mTLS,
// SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512;
// a wrong password, an unknown user, an expired and an untrusted client
// certificate, a client without a certificate on the mTLS listener and a
// plaintext client on a TLS port are refused with the error a Kafka broker
// gives, and the broker serves the good clients after each.
func TestSecurityFranzGo(t *testing.T) {
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, securityProps(pki))
	ss.addUser(t, "alice", "alice-secret")
	alice := pki.Client(t, "Alice")
	good := map[string][]kgo.Opt{
		"SSL":                          {kgo.DialTLSConfig(ss.tlsConfig(t, nil))},
		"MTLS":                         {kgo.DialTLSConfig(ss.tlsConfig(t, &alice))},
		"SASL_PLAINTEXT/SCRAM-SHA-512": {scramOpt("SCRAM-SHA-512", "alice", "alice-secret")},
		"SASL_SSL/SCRAM-SHA-512":       {kgo.DialTLSConfig(ss.tlsConfig(t, nil)), scramOpt("SCRAM-SHA-512", "alice", "alice-secret")},
		"SASL_SSL/SCRAM-SHA-256":       {kgo.DialTLSConfig(ss.tlsConfig(t, nil)), scramOpt("SCRAM-SHA-256", "alice", "alice-secret")},
		"SASL_SSL/PLAIN":               {kgo.DialTLSConfig(ss.tlsConfig(t, nil)), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())},
	}
	listenerOf := func(name string) string { l, _, _ := strings.Cut(name, "/"); return l }
	checkGood := func(t *testing.T, topic string) {
		t.Helper()
		for name, opts := range good {
			if err := roundTripRecords(t, ss.addrs[listenerOf(name)], topic+"-"+strings.NewReplacer("/", "-").Replace(name), 3, opts...); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	checkGood(t, "first")

	bad := []struct {
		name, listener string
		opts           []kgo.Opt
		want           func(error) bool
		what           string
	}{
		{"wrong password", "SASL_SSL", []kgo.Opt{kgo.DialTLSConfig(ss.tlsConfig(t, nil)), scramOpt("SCRAM-SHA-512", "alice", "nope")},
			func(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) }, "SASL_AUTHENTICATION_FAILED"},
		{"wrong password PLAIN", "SASL_PLAINTEXT", []kgo.Opt{kgo.SASL(plain.Auth{User: "alice", Pass: "nope"}.AsMechanism())},
			func(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) }, "SASL_AUTHENTICATION_FAILED"},
		{"unknown user", "SASL_SSL", []kgo.Opt{kgo.DialTLSConfig(ss.tlsConfig(t, nil)), scramOpt("SCRAM-SHA-256", "mallory", "x")},
			func(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) }, "SASL_AUTHENTICATION_FAILED"},
		{"no SASL on a SASL listener", "SASL_PLAINTEXT", nil,
			func(err error) bool { return err != nil }, "a closed connection"},
		{"expired certificate", "MTLS", []kgo.Opt{kgo.DialTLSConfig(ss.tlsConfig(t, ptr(pki.ExpiredClient(t, "old"))))},
			remoteAlert("expired certificate"), "the TLS alert certificate_expired"},
		{"untrusted certificate", "MTLS", []kgo.Opt{kgo.DialTLSConfig(sendCertAnyway(ss.tlsConfig(t, ptr(pki.UntrustedClient(t, "eve")))))},
			remoteAlert("unknown certificate authority"), "the TLS alert unknown_ca"},
		{"no certificate on mTLS", "MTLS", []kgo.Opt{kgo.DialTLSConfig(ss.tlsConfig(t, nil))},
			remoteAlert("certificate required"), "the TLS alert certificate_required"},
		{"plaintext client on a TLS port", "SSL", nil,
			func(err error) bool { return err != nil }, "a closed connection"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			opts := append([]kgo.Opt{kgo.SeedBrokers(ss.addrs[b.listener]), kgo.RetryTimeout(2 * time.Second), kgo.RequestRetries(1)}, b.opts...)
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = cl.Ping(ctx)
			if !b.want(err) {
				t.Fatalf("got %v, want %s", err, b.what)
			}
			t.Logf("refused: %v", err)
			checkGood(t, "after-"+strings.ReplaceAll(b.name, " ", "-"))
		})
	}
}

func ptr[T any](v T) *T { return &v }

// remoteAlert: the server refused the client's certificate in the
// handshake with the named TLS alert (a closed or reset connection is not
// a refusal: it is what a broker that crashed or never checked gives too).
func remoteAlert(name string) func(error) bool {
	return func(err error) bool { return err != nil && strings.Contains(err.Error(), "remote error: tls: "+name) }
}

// sendCertAnyway makes the client present its certificate even when the
// server's CertificateRequest names other CAs (Go's client would otherwise
// send none, and the server's chain check would never run).
func sendCertAnyway(c *tls.Config) *tls.Config {
	cert := c.Certificates[0]
	c.Certificates = nil
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return c
}

var _ sasl.Mechanism = plain.Auth{}.AsMechanism()

// TestAlterUserSCRAMCredentialsErrors: deleting a credential a user does
// not have is RESOURCE_NOT_FOUND and changes nothing of that user; a user's
// upsertion and deletion in one request are applied together.
func TestAlterUserSCRAMCredentialsErrors(t *testing.T) {
	pki := tlscerts.New(t)
	ss := startSecureServer(t, pki, securityProps(pki))
	ss.addUser(t, "alice", "alice-secret")
	adm := kadm.NewClient(newClient(t, ss.addrs["PLAINTEXT"]))
	res, err := adm.AlterUserSCRAMs(testCtx(t), []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := res["bob"].Err; !errors.Is(err, kerr.ResourceNotFound) {
		t.Fatalf("deleting a credential bob does not have: %v, want RESOURCE_NOT_FOUND", err)
	}
	res, err = adm.AlterUserSCRAMs(testCtx(t), []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}},
		[]kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "new-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter alice: %v, %v", err, res.Error())
	}
	described, err := adm.DescribeUserSCRAMs(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := described["alice"]; len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 || d.CredInfos[0].Iterations != 4096 {
		t.Fatalf("alice after the change: %+v", d)
	}
	if _, ok := described["bob"]; ok {
		t.Fatal("a failed deletion created bob")
	}
	if err := roundTripRecords(t, ss.addrs["SASL_PLAINTEXT"], "new-password", 1, scramOpt("SCRAM-SHA-512", "alice", "new-secret")); err != nil {
		t.Fatalf("alice with the new password: %v", err)
	}
}
