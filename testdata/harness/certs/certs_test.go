package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"
)

// An issued certificate verifies against its CA for the hosts it names and
// for client use, not against another CA or for another host; an expired one
// does not verify; the files load with crypto/tls.
func TestIssueVerifies(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Issue("broker", Options{Hosts: []string{"127.0.0.1", "localhost"}, OrganizationalUnit: "eng"})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(other.Cert)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"}); err == nil {
		t.Error("verified for a host it does not name")
	}
	if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: otherPool}); err == nil {
		t.Error("verified against another CA")
	}
	if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client use: %v", err)
	}
	if got := p.Cert.Subject.String(); got != "CN=broker,OU=eng" {
		t.Errorf("subject %q", got)
	}
	expired, err := ca.Issue("old", Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := expired.Cert.Verify(x509.VerifyOptions{Roots: pool}); err == nil {
		t.Error("an expired certificate verified")
	}

	dir := t.TempDir()
	files, err := p.Write(dir, "broker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.LoadX509KeyPair(files.Cert, files.Key); err != nil {
		t.Errorf("crypto/tls cannot load the pair: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(files.Combined, files.Combined); err != nil {
		t.Errorf("crypto/tls cannot load the combined file: %v", err)
	}
	combined, _ := os.ReadFile(files.Combined)
	if !strings.HasPrefix(string(combined), "-----BEGIN PRIVATE KEY-----") || strings.Count(string(combined), "BEGIN CERTIFICATE") != 2 {
		t.Errorf("combined file is not key then chain:\n%s", combined)
	}
	if st, _ := os.Stat(files.Key); st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", st.Mode().Perm())
	}
	caPath, err := ca.Write(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(caPath); !pool.Equal(poolOf(t, b)) {
		t.Error("ca.crt is not the CA")
	}
}

func poolOf(t *testing.T, pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		t.Fatal("no certificate in PEM")
	}
	return p
}
