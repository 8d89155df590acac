// Package certs makes X.509 certificates for tests with crypto/x509: a
// certificate authority, server and client certificates it signs, and the
// PEM files that Go (crypto/tls), Apache Kafka (ssl.keystore.type=PEM,
// ssl.truststore.type=PEM), librdkafka and Python read.
//
//	ca, _ := certs.NewCA("test CA")
//	srv, _ := ca.Issue("broker", certs.Options{Hosts: []string{"127.0.0.1", "localhost"}})
//	files, _ := srv.Write(dir, "broker")   // broker.crt, broker.key, broker.pem (key + chain)
//	caFile, _ := ca.Write(dir, "ca")        // ca.crt
//
// Keys are ECDSA P-256 (quick to make on a slow machine) in PKCS#8 PEM
// ("BEGIN PRIVATE KEY"), unencrypted, which is what Kafka's PEM key store
// reads without ssl.key.password. A certificate is valid for both server and
// client authentication unless Options say otherwise.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// CertPEM is Cert in PEM.
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// Options shape an issued certificate. The zero value is a certificate
// valid from an hour ago for a day, for server and client use, with no
// host names.
type Options struct {
	// Hosts are DNS names or IP addresses put in the subject alternative names.
	Hosts []string
	// NotBefore and NotAfter bound the validity; zero values mean an hour
	// ago and a day from now. A NotAfter in the past makes an expired
	// certificate.
	NotBefore, NotAfter time.Time
	// Organization and OrganizationalUnit go into the subject (Kafka's
	// mTLS principal is the whole subject, e.g. "CN=alice,OU=eng,O=sluice").
	Organization, OrganizationalUnit string
}

// Pair is an issued certificate and its private key.
type Pair struct {
	// Cert is the certificate.
	Cert *x509.Certificate
	// CertPEM is the certificate followed by its issuer's (the chain).
	CertPEM []byte
	// KeyPEM is the private key, PKCS#8 unencrypted.
	KeyPEM []byte
}

// Files are the paths Pair.Write made.
type Files struct {
	// Cert holds the certificate chain (NAME.crt).
	Cert string
	// Key holds the private key (NAME.key).
	Key string
	// Combined holds the key followed by the chain (NAME.pem): Kafka's
	// ssl.keystore.location with ssl.keystore.type=PEM.
	Combined string
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
}

// NewCA makes a self-signed CA named commonName, valid from an hour ago for
// ten years.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"sluice tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// Issue signs a certificate for commonName.
func (ca *CA) Issue(commonName string, o Options) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	notBefore, notAfter := o.NotBefore, o.NotAfter
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	subject := pkix.Name{CommonName: commonName}
	if o.Organization != "" {
		subject.Organization = []string{o.Organization}
	}
	if o.OrganizationalUnit != "" {
		subject.OrganizationalUnit = []string{o.OrganizationalUnit}
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: certificate %s: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM...)
	return &Pair{Cert: cert, CertPEM: chain, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})}, nil
}

// Write puts the CA certificate in dir/NAME.crt and returns its path.
func (ca *CA) Write(dir, name string) (string, error) {
	path := filepath.Join(dir, name+".crt")
	return path, os.WriteFile(path, ca.CertPEM, 0o644)
}

// Write puts the pair in dir as NAME.crt, NAME.key (mode 0600) and NAME.pem.
func (p *Pair) Write(dir, name string) (Files, error) {
	f := Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), Combined: filepath.Join(dir, name+".pem")}
	if err := os.WriteFile(f.Cert, p.CertPEM, 0o644); err != nil {
		return f, err
	}
	if err := os.WriteFile(f.Key, p.KeyPEM, 0o600); err != nil {
		return f, err
	}
	return f, os.WriteFile(f.Combined, append(append([]byte{}, p.KeyPEM...), p.CertPEM...), 0o600)
}
