package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrConfig is returned (wrapped) for a security configuration that cannot
// be used: a missing or unreadable PEM file, a key that does not match its
// certificate, an unknown protocol name.
var ErrConfig = errors.New("security: invalid configuration")

// TLSOptions are Kafka's ssl.* properties of a listener, PEM only.
type TLSOptions struct {
	KeystoreType             string // ssl.keystore.type: PEM (the only type served)
	KeystoreLocation         string // ssl.keystore.location: a PEM file holding the private key and the certificate chain
	KeystoreCertificateChain string // ssl.keystore.certificate.chain: the chain inline (PEM)
	KeystoreKey              string // ssl.keystore.key: the private key inline (PEM)
	KeyPassword              string // ssl.key.password: refused if set (encrypted keys are not supported)
	TruststoreType           string // ssl.truststore.type: PEM
	TruststoreLocation       string // ssl.truststore.location: a PEM file of CA certificates
	TruststoreCertificates   string // ssl.truststore.certificates: the CA certificates inline (PEM)
	ClientAuth               string // ssl.client.auth: required | requested | none
	EnabledProtocols         string // ssl.enabled.protocols: TLSv1.2,TLSv1.3 (nothing older is served)
	PrincipalMappingRules    string // ssl.principal.mapping.rules: RULE:pattern/replacement/[LU], ..., DEFAULT
}

// TLS is a listener's TLS configuration. Files named by
// ssl.keystore.location and ssl.truststore.location are read again when
// their modification time or size changes, checked on every handshake (one
// stat each), so a renewed certificate is used by the next connection; a
// file that fails to load keeps the previous certificate in use and the
// error is reported by LastReloadError.
type TLS struct {
	opts  TLSOptions
	rules []principalRule
	base  *tls.Config

	mu         sync.Mutex // guards the fields below
	cert       *tls.Certificate
	pool       *x509.CertPool
	keyStamp   fileStamp
	trustStamp fileStamp
	reloadErr  error
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

// NewTLS checks opts and loads the certificates.
func NewTLS(opts TLSOptions) (*TLS, error) {
	for _, t := range []struct{ key, v string }{{"ssl.keystore.type", opts.KeystoreType}, {"ssl.truststore.type", opts.TruststoreType}} {
		if t.v != "" && !strings.EqualFold(t.v, "PEM") {
			return nil, fmt.Errorf("%w: %s=%s: only PEM is supported (convert a JKS or PKCS12 store with keytool/openssl)", ErrConfig, t.key, t.v)
		}
	}
	if opts.KeyPassword != "" {
		return nil, fmt.Errorf("%w: ssl.key.password: encrypted private keys are not supported; give an unencrypted PKCS#8 key (openssl pkcs8 -nocrypt) with file permissions 0600", ErrConfig)
	}
	if (opts.KeystoreLocation == "") == (opts.KeystoreCertificateChain == "") {
		return nil, fmt.Errorf("%w: set exactly one of ssl.keystore.location or ssl.keystore.certificate.chain (with ssl.keystore.key)", ErrConfig)
	}
	if opts.TruststoreLocation != "" && opts.TruststoreCertificates != "" {
		return nil, fmt.Errorf("%w: set at most one of ssl.truststore.location and ssl.truststore.certificates", ErrConfig)
	}
	rules, err := ParsePrincipalRules(opts.PrincipalMappingRules)
	if err != nil {
		return nil, err
	}
	minV, maxV, err := tlsVersions(opts.EnabledProtocols)
	if err != nil {
		return nil, err
	}
	var auth tls.ClientAuthType
	switch strings.ToLower(strings.TrimSpace(opts.ClientAuth)) {
	case "", "none":
		auth = tls.NoClientCert
	case "requested":
		auth = tls.VerifyClientCertIfGiven
	case "required":
		auth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("%w: ssl.client.auth=%s: use required, requested or none", ErrConfig, opts.ClientAuth)
	}
	if auth != tls.NoClientCert && opts.TruststoreLocation == "" && opts.TruststoreCertificates == "" {
		return nil, fmt.Errorf("%w: ssl.client.auth=%s needs ssl.truststore.location or ssl.truststore.certificates (the CAs client certificates are checked against)", ErrConfig, opts.ClientAuth)
	}
	t := &TLS{opts: opts, rules: rules}
	t.base = &tls.Config{MinVersion: minV, MaxVersion: maxV, ClientAuth: auth}
	if err := t.reload(true); err != nil {
		return nil, err
	}
	return t, nil
}

func tlsVersions(v string) (uint16, uint16, error) {
	if strings.TrimSpace(v) == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	var minV, maxV uint16
	for _, p := range strings.Split(v, ",") {
		var ver uint16
		switch strings.TrimSpace(p) {
		case "TLSv1.2":
			ver = tls.VersionTLS12
		case "TLSv1.3":
			ver = tls.VersionTLS13
		default:
			return 0, 0, fmt.Errorf("%w: ssl.enabled.protocols: %q is not served (TLSv1.2 and TLSv1.3 only)", ErrConfig, strings.TrimSpace(p))
		}
		if minV == 0 || ver < minV {
			minV = ver
		}
		maxV = max(maxV, ver)
	}
	return minV, maxV, nil
}

// reload reads the PEM material again if a file changed (or always when
// force); on error the previous material stays in use.
func (t *TLS) reload(force bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.opts
	keyStamp, trustStamp := t.keyStamp, t.trustStamp
	changed := force
	if o.KeystoreLocation != "" {
		st, err := stampOf(o.KeystoreLocation)
		if err != nil {
			return t.failLocked(fmt.Errorf("%w: ssl.keystore.location %s: %v", ErrConfig, o.KeystoreLocation, err))
		}
		changed = changed || st != keyStamp
		keyStamp = st
	}
	if o.TruststoreLocation != "" {
		st, err := stampOf(o.TruststoreLocation)
		if err != nil {
			return t.failLocked(fmt.Errorf("%w: ssl.truststore.location %s: %v", ErrConfig, o.TruststoreLocation, err))
		}
		changed = changed || st != trustStamp
		trustStamp = st
	}
	if !changed {
		return nil
	}
	chain, key := []byte(o.KeystoreCertificateChain), []byte(o.KeystoreKey)
	if o.KeystoreLocation != "" {
		data, err := os.ReadFile(o.KeystoreLocation)
		if err != nil {
			return t.failLocked(fmt.Errorf("%w: ssl.keystore.location: %v", ErrConfig, err))
		}
		chain, key = data, data
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return t.failLocked(fmt.Errorf("%w: keystore: %v", ErrConfig, err))
	}
	var pool *x509.CertPool
	trust := []byte(o.TruststoreCertificates)
	if o.TruststoreLocation != "" {
		if trust, err = os.ReadFile(o.TruststoreLocation); err != nil {
			return t.failLocked(fmt.Errorf("%w: ssl.truststore.location: %v", ErrConfig, err))
		}
	}
	if len(trust) > 0 {
		pool = x509.NewCertPool()
		if n := appendPEMCerts(pool, trust); n == 0 {
			return t.failLocked(fmt.Errorf("%w: truststore holds no PEM certificate", ErrConfig))
		}
	}
	t.cert, t.pool, t.keyStamp, t.trustStamp, t.reloadErr = &cert, pool, keyStamp, trustStamp, nil
	return nil
}

func (t *TLS) failLocked(err error) error {
	t.reloadErr = err
	return err
}

func appendPEMCerts(pool *x509.CertPool, data []byte) int {
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return n
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			continue
		}
		pool.AddCert(c)
		n++
	}
}

// LastReloadError is the error of the last failed reload, nil once a
// reload succeeded.
func (t *TLS) LastReloadError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reloadErr
}

// Config is the tls.Config to serve with: each handshake first reloads
// changed files, then uses the current certificate and trusted CAs.
func (t *TLS) Config() *tls.Config {
	c := t.base.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		_ = t.reload(false) // a bad new file keeps the old material; LastReloadError says why
		t.mu.Lock()
		cert, pool := t.cert, t.pool
		t.mu.Unlock()
		cc := t.base.Clone()
		cc.Certificates = []tls.Certificate{*cert}
		cc.ClientCAs = pool
		return cc, nil
	}
	return c
}

// Principal maps a verified client certificate chain to a principal with
// ssl.principal.mapping.rules ("User:" + the mapped name); with no
// certificate it is Anonymous.
func (t *TLS) Principal(state tls.ConnectionState) string {
	if len(state.PeerCertificates) == 0 {
		return Anonymous
	}
	return "User:" + MapPrincipal(t.rules, state.PeerCertificates[0].Subject.String())
}
