package kafka

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/certs"
)

// Every combination that cannot work is refused, naming the setting.
func TestSecurityCheckNamesTheField(t *testing.T) {
	for _, c := range []struct {
		sec   Security
		field SecurityField
		want  string
	}{
		{Security{Protocol: "TLS"}, FieldProtocol, `unknown security protocol "TLS"`},
		{Security{Protocol: "SASL_SSL"}, FieldMechanism, "needs a SASL mechanism"},
		{Security{Protocol: "SASL_SSL", Mechanism: "GSSAPI"}, FieldMechanism, `unknown SASL mechanism "GSSAPI"`},
		{Security{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512"}, FieldUsername, "needs a user name"},
		{Security{Protocol: "sasl_plaintext", Mechanism: "plain", Username: "u"}, FieldPassword, "needs a password"},
		{Security{Mechanism: "PLAIN"}, FieldMechanism, "security protocol is PLAINTEXT"},
		{Security{Protocol: "SSL", Username: "u"}, FieldUsername, "security protocol is SSL"},
		{Security{Password: "p"}, FieldPassword, "use SASL_SSL"},
		{Security{CA: "ca.crt"}, FieldCA, "use SSL or SASL_SSL"},
		{Security{Protocol: "SASL_PLAINTEXT", Mechanism: "PLAIN", Username: "u", Password: "p", Cert: "c"}, FieldCert, "use SSL or SASL_SSL"},
		{Security{Protocol: "SSL", Cert: "c.crt"}, FieldKey, "certificate is given without its key"},
		{Security{Protocol: "SSL", Key: "c.key"}, FieldCert, "key is given without its certificate"},
		{Security{Protocol: "SSL", CA: "/nonexistent/ca.crt"}, FieldCA, "no such file"},
	} {
		err := c.sec.Check()
		if err == nil {
			_, err = c.sec.TLSConfig()
		}
		var se *SecurityError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrBadInput) {
			t.Errorf("%+v: got %v, want %s: ...%s...", c.sec, err, c.field, c.want)
			continue
		}
		if named := Named(err, FlagName); !strings.HasPrefix(named.Error(), SecurityFlagNames[c.field]+": ") {
			t.Errorf("flag-named error %q does not start with %s", named, SecurityFlagNames[c.field])
		}
	}
	for _, ok := range []Security{{}, {Protocol: "plaintext"}, {Protocol: "SSL"},
		{Protocol: "SASL_SSL", Mechanism: "scram-sha-256", Username: "u", Password: "p"}} {
		if err := ok.Check(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// A password never shows in fmt, JSON or slog output of a Security.
func TestSecretIsRedacted(t *testing.T) {
	const pw = "hunter2-Very-5ecret"
	sec := Security{Protocol: "SASL_SSL", Mechanism: "PLAIN", Username: "u", Password: Secret(pw)}
	j, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("connect", "security", sec, "password", sec.Password)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("connect", "security", sec, "password", sec.Password)
	for _, out := range []string{fmt.Sprint(sec), fmt.Sprintf("%v %+v %#v %s", sec, sec, sec, sec.Password), string(j), logged.String()} {
		if strings.Contains(out, pw) {
			t.Errorf("the password shows in %s", out)
		}
	}
	if !strings.Contains(string(j), redacted) || sec.Password.Reveal() != pw {
		t.Errorf("json %s; Reveal %q", j, sec.Password.Reveal())
	}
}

func TestReadPasswordFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for body, want := range map[string]string{"pw\n": "pw", "pw\r\nmore\n": "pw", "p w ": "p w "} {
		if got, err := ReadPasswordFile(write("ok", body)); err != nil || got.Reveal() != want {
			t.Errorf("%q: got %q, %v; want %q", body, got.Reveal(), err, want)
		}
	}
	for _, bad := range []string{write("empty", ""), write("blank", "\nsecond\n"), write("big", strings.Repeat("x", maxPasswordFile+1)), filepath.Join(dir, "missing")} {
		if _, err := ReadPasswordFile(bad); !errors.Is(err, ErrBadInput) {
			t.Errorf("%s: got %v, want a bad-input error", bad, err)
		}
	}
}

// A Kafka client properties file, as users keep them for Kafka's tools.
func TestParseClientProperties(t *testing.T) {
	sec, err := ParseClientProperties(`# client.properties
security.protocol=SASL_SSL
sasl.mechanism = SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="alice" \
    password="pa\\"ss word";
ssl.truststore.type: PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.keystore.type=PEM
ssl.keystore.location=/etc/kafka/client.pem
ssl.endpoint.identification.algorithm=
client.id=tools
`)
	if err != nil {
		t.Fatal(err)
	}
	want := Security{Protocol: "SASL_SSL", Mechanism: "SCRAM-SHA-512", Username: "alice", Password: `pa"ss word`,
		CA: "/etc/kafka/ca.pem", Cert: "/etc/kafka/client.pem", Key: "/etc/kafka/client.pem", SkipHostnameVerification: true}
	if sec != want {
		t.Errorf("got  %+v (password %q)\nwant %+v", sec, sec.Password.Reveal(), want)
	}
	plain, err := ParseClientProperties("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=pw;\n")
	if err != nil || plain.Username != "bob" || plain.Password.Reveal() != "pw" {
		t.Errorf("plain: %+v %v", plain, err)
	}
	for body, want := range map[string]string{
		"security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=x.jks\n":                                                                     "ssl.truststore.type JKS is not supported",
		"security.protocol=SSL\nssl.keystore.type=PKCS12\n":                                                                                                   "ssl.keystore.type PKCS12",
		"security.protocol=SSL\nssl.keystore.key=-----BEGIN\n":                                                                                                "ssl.keystore.key is not supported",
		"security.protocol=SSL\nssl.keystore.location=k.pem\nssl.key.password=x\n":                                                                            "encrypted private keys",
		"security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n":                                                                                                 "sasl.mechanism: unknown SASL mechanism",
		"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n":                                                                                                  "sasl.jaas.config: SASL_SSL with PLAIN needs a user name",
		"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n":                         "login module com.sun.security.auth.module.Krb5LoginModule is not supported",
		"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=x.PlainLoginModule username=\"a\";\n":                                             "not a control flag",
		"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"a;\n": "unterminated quote",
		"security.protocol=TLS\n": "security.protocol: unknown security protocol",
		"ssl.endpoint.identification.algorithm=none\nsecurity.protocol=SSL\n": "want https or empty",
		"=value\n": "line 1: no key",
	} {
		if _, err := ParseClientProperties(body); err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrBadInput) {
			t.Errorf("%q: got %v, want ...%s...", body, err, want)
		}
	}
}

// The TLS configuration trusts exactly the CA file and presents the client
// certificate.
func TestTLSConfigFromFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.Write(dir, "ca")
	pair, _ := ca.Issue("client", certs.Options{})
	files, err := pair.Write(dir, "client")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Security{Protocol: "SSL", CA: caFile, Cert: files.Combined, Key: files.Combined, ServerName: "broker"}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 || cfg.RootCAs == nil || cfg.ServerName != "broker" || cfg.InsecureSkipVerify {
		t.Errorf("config %+v", cfg)
	}
	notPEM := filepath.Join(dir, "ca.jks")
	os.WriteFile(notPEM, []byte{0xfe, 0xed, 0xfe, 0xed}, 0o644)
	if _, err := (Security{Protocol: "SSL", CA: notPEM}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a JKS CA file: %v", err)
	}
	if _, err := (Security{Protocol: "SSL", Cert: files.Cert, Key: caFile}).TLSConfig(); err == nil || !strings.Contains(err.Error(), "tls.cert: client certificate") {
		t.Errorf("a key file without a key: %v", err)
	}
	if cfg, _ := (Security{}).TLSConfig(); cfg != nil {
		t.Error("PLAINTEXT has a TLS config")
	}
}

// SkipHostnameVerification (ssl.endpoint.identification.algorithm= empty)
// turns off crypto/tls's checks for its own: a broker whose certificate
// names another host is accepted when the CA signed it, and refused when
// another CA did, as with the name checked.
func TestSkipHostnameVerificationChecksTheChain(t *testing.T) {
	dir := t.TempDir()
	ca, _ := certs.NewCA("ca")
	caFile, _ := ca.Write(dir, "ca")
	other, _ := certs.NewCA("other")
	handshake := func(issuer *certs.CA, sec Security) error {
		pair, err := issuer.Issue("broker", certs.Options{Hosts: []string{"elsewhere.example"}})
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := sec.TLSConfig()
		if err != nil {
			t.Fatal(err)
		}
		c, s := net.Pipe()
		defer c.Close()
		defer s.Close()
		go func() { _ = tls.Server(s, &tls.Config{Certificates: []tls.Certificate{cert}}).Handshake() }()
		cfg.ServerName = "broker.example"
		return tls.Client(c, cfg).Handshake()
	}
	skip := Security{Protocol: SSL, CA: caFile, SkipHostnameVerification: true}
	if err := handshake(ca, skip); err != nil {
		t.Errorf("a certificate of the CA for another host: %v, want accepted", err)
	}
	if err := handshake(other, skip); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("a certificate of another CA: %v, want refused", err)
	}
	if err := handshake(ca, Security{Protocol: SSL, CA: caFile}); err == nil || !strings.Contains(err.Error(), "broker.example") {
		t.Errorf("another host with the name checked: %v, want refused", err)
	}
}
