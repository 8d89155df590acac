// Package tlscerts makes the certificates of a TLS test with crypto/x509: a
// CA, a server certificate for 127.0.0.1 and localhost, client
// certificates (one expired, one from a CA the server does not trust),
// written as PEM files in a directory of the test.
//
//	pki := tlscerts.New(t)          // CA, server (key+chain in one PEM)
//	pki.CAFile, pki.ServerFile      // ssl.truststore.location, ssl.keystore.location
//	alice := pki.Client(t, "alice") // CN=alice,OU=clients,O=sluice: CertFile, KeyFile
package tlscerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// PKI is a test CA with its server certificate.
type PKI struct {
	Dir        string
	CAFile     string // the CA certificate (PEM)
	ServerFile string // the server's private key and certificate chain in one PEM (Kafka's ssl.keystore.location)
	ServerCert string // the server certificate alone (PEM file)
	ServerKey  string // the server key alone (PEM file)
	ca         *x509.Certificate
	caKey      *ecdsa.PrivateKey
}

// Client is a client certificate's files.
type Client struct {
	CertFile, KeyFile string
	Subject           string // the distinguished name as Go prints it (RFC 2253 order)
}

// New makes a CA and a server certificate for 127.0.0.1 in t.TempDir().
func New(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{Dir: t.TempDir()}
	p.ca, p.caKey = selfSigned(t, "sluice test CA")
	p.CAFile = filepath.Join(p.Dir, "ca.pem")
	writePEM(t, p.CAFile, "CERTIFICATE", p.ca.Raw)
	p.ServerFile, p.ServerCert, p.ServerKey = p.Server(t, "server")
	return p
}

// Server issues another server certificate for 127.0.0.1 named name
// (a renewal); it returns the combined key+chain file and the two parts.
func (p *PKI) Server(t testing.TB, name string) (combined, cert, key string) {
	t.Helper()
	tmpl := template(name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	tmpl.DNSNames = []string{"localhost"}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, k := sign(t, tmpl, p.ca, p.caKey)
	return p.write(t, name, der, k)
}

func (p *PKI) write(t testing.TB, name string, der []byte, k *ecdsa.PrivateKey) (combined, cert, key string) {
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, combined = filepath.Join(p.Dir, name+".crt"), filepath.Join(p.Dir, name+".key"), filepath.Join(p.Dir, name+".pem")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, key, "PRIVATE KEY", kder)
	both := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(combined, both, 0o600); err != nil {
		t.Fatal(err)
	}
	return combined, cert, key
}

// Client issues a client certificate CN=cn,OU=clients,O=sluice valid now.
func (p *PKI) Client(t testing.TB, cn string) Client {
	return p.client(t, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), p.ca, p.caKey)
}

// ExpiredClient issues a client certificate that expired an hour ago.
func (p *PKI) ExpiredClient(t testing.TB, cn string) Client {
	return p.client(t, cn, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), p.ca, p.caKey)
}

// UntrustedClient issues a client certificate from a CA of its own.
func (p *PKI) UntrustedClient(t testing.TB, cn string) Client {
	other, otherKey := selfSigned(t, "some other CA")
	return p.client(t, cn, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), other, otherKey)
}

func (p *PKI) client(t testing.TB, cn string, from, until time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey) Client {
	t.Helper()
	tmpl := template(cn, from, until)
	tmpl.Subject.OrganizationalUnit = []string{"clients"}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der, k := sign(t, tmpl, ca, caKey)
	_, cert, key := p.write(t, "client-"+cn+"-"+tmpl.SerialNumber.String(), der, k)
	return Client{CertFile: cert, KeyFile: key, Subject: tmpl.Subject.String()}
}

var serial atomic.Int64

func template(cn string, from, until time.Time) *x509.Certificate {
	return &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano() + serial.Add(1)),
		Subject:   pkix.Name{CommonName: cn, Organization: []string{"sluice"}},
		NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature}
}

func selfSigned(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	tmpl := template(cn, time.Now().Add(-time.Hour), time.Now().Add(48*time.Hour))
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func sign(t testing.TB, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der, k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
