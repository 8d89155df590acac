// Package tlscerts is the test-side face of testdata/harness/certs: a CA, a
// server certificate for 127.0.0.1 and localhost, client certificates (one
// expired, one from a CA the server does not trust), written as PEM files in
// a directory of the test, failing the test on any error.
//
//	pki := tlscerts.New(t)          // CA, server (key+chain in one PEM)
//	pki.CAFile, pki.ServerFile      // ssl.truststore.location, ssl.keystore.location
//	alice := pki.Client(t, "alice") // CN=alice,OU=clients,O=sluice: CertFile, KeyFile
package tlscerts

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/certs"
)

// PKI is a test CA with its server certificate.
type PKI struct {
	Dir        string
	CAFile     string // the CA certificate (PEM)
	ServerFile string // the server's private key and certificate chain in one PEM (Kafka's ssl.keystore.location)
	ServerCert string // the server certificate chain alone (PEM file)
	ServerKey  string // the server key alone (PEM file)
	ca         *certs.CA
}

// Client is a client certificate's files.
type Client struct {
	CertFile, KeyFile string
	Subject           string // the distinguished name as Go prints it (RFC 2253 order)
}

// New makes a CA and a server certificate for 127.0.0.1 in t.TempDir().
func New(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{Dir: t.TempDir(), ca: newCA(t, "sluice test CA")}
	var err error
	if p.CAFile, err = p.ca.Write(p.Dir, "ca"); err != nil {
		t.Fatal(err)
	}
	p.ServerFile, p.ServerCert, p.ServerKey = p.Server(t, "server")
	return p
}

// Server issues another server certificate for 127.0.0.1 named name
// (a renewal); it returns the combined key+chain file and the two parts.
func (p *PKI) Server(t testing.TB, name string) (combined, cert, key string) {
	t.Helper()
	f := p.issue(t, p.ca, name, name, certs.Options{Hosts: []string{"127.0.0.1", "localhost"}, Organization: "sluice"})
	return f.Combined, f.Cert, f.Key
}

// Client issues a client certificate CN=cn,OU=clients,O=sluice valid now.
func (p *PKI) Client(t testing.TB, cn string) Client {
	t.Helper()
	return p.client(t, p.ca, cn, certs.Options{})
}

// ExpiredClient issues a client certificate that expired an hour ago.
func (p *PKI) ExpiredClient(t testing.TB, cn string) Client {
	t.Helper()
	return p.client(t, p.ca, cn, certs.Options{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
}

// UntrustedClient issues a client certificate from a CA of its own.
func (p *PKI) UntrustedClient(t testing.TB, cn string) Client {
	t.Helper()
	return p.client(t, newCA(t, "some other CA"), cn, certs.Options{})
}

var issued atomic.Int64

func (p *PKI) client(t testing.TB, ca *certs.CA, cn string, o certs.Options) Client {
	t.Helper()
	o.Organization, o.OrganizationalUnit = "sluice", "clients"
	name := fmt.Sprintf("client-%s-%d", cn, issued.Add(1))
	pair, f := p.issuePair(t, ca, cn, name, o)
	return Client{CertFile: f.Cert, KeyFile: f.Key, Subject: pair.Cert.Subject.String()}
}

func (p *PKI) issue(t testing.TB, ca *certs.CA, cn, name string, o certs.Options) certs.Files {
	t.Helper()
	_, f := p.issuePair(t, ca, cn, name, o)
	return f
}

func (p *PKI) issuePair(t testing.TB, ca *certs.CA, cn, name string, o certs.Options) (*certs.Pair, certs.Files) {
	t.Helper()
	pair, err := ca.Issue(cn, o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := pair.Write(p.Dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return pair, f
}

func newCA(t testing.TB, name string) *certs.CA {
	t.Helper()
	ca, err := certs.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}
