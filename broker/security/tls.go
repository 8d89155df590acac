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
// stat each), so a renewed certificate is used by the next connection. A
// change is read once: a file that fails to load keeps the previous
// certificate in use until the file changes again, and the failure is
// reported (NewTLS's onReload, LastReloadError).
type TLS struct {
	opts     TLSOptions
	rules    []principalRule
	base     *tls.Config
	server   *tls.Config // what Config returns: base with GetConfigForClient
	onReload func(error)

	mu        sync.Mutex   // guards the fields below
	current   *tls.Config  // base with the certificate and CAs in use
	tried     [2]fileStamp // the keystore and truststore files as last read (successfully or not)
	reloadErr error
}

// fileStamp identifies a version of a file; a file that cannot be
// stat'ed has size -1.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) fileStamp {
	if path == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{size: -1} // the read that follows reports why
	}
	return fileStamp{fi.ModTime(), fi.Size()}
}

// readFile reads a PEM file (a variable for the test that counts reads).
var readFile = os.ReadFile

// NewTLS checks opts and loads the certificates. onReload, if not nil, is
// called after each reading of a changed file: with nil when the new
// material is in use, with the error when the previous stays.
func NewTLS(opts TLSOptions, onReload func(error)) (*TLS, error) {
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
	t := &TLS{opts: opts, rules: rules, onReload: onReload}
	t.base = &tls.Config{MinVersion: minV, MaxVersion: maxV, ClientAuth: auth}
	if err := t.reload(true); err != nil {
		return nil, err
	}
	t.server = t.base.Clone()
	t.server.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		_ = t.reload(false) // a bad new file keeps the old material; onReload says why
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.current, nil
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

// reload reads the PEM material again if a file changed since it was last
// read (or always when force); on error the previous material stays in
// use, and the same file is not read again until it changes.
func (t *TLS) reload(force bool) error {
	o := t.opts
	stamps := [2]fileStamp{stampOf(o.KeystoreLocation), stampOf(o.TruststoreLocation)}
	t.mu.Lock()
	if !force && stamps == t.tried {
		t.mu.Unlock()
		return nil
	}
	t.tried = stamps
	cfg, err := t.load()
	if err == nil {
		t.current = cfg
	}
	t.reloadErr = err
	t.mu.Unlock()
	if !force && t.onReload != nil {
		t.onReload(err)
	}
	return err
}

// load reads and parses the keystore and truststore.
func (t *TLS) load() (*tls.Config, error) {
	o := t.opts
	chain, key := []byte(o.KeystoreCertificateChain), []byte(o.KeystoreKey)
	if o.KeystoreLocation != "" {
		data, err := readFile(o.KeystoreLocation)
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.keystore.location: %v", ErrConfig, err)
		}
		chain, key = data, data
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return nil, fmt.Errorf("%w: keystore: %v", ErrConfig, err)
	}
	trust := []byte(o.TruststoreCertificates)
	if o.TruststoreLocation != "" {
		if trust, err = readFile(o.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("%w: ssl.truststore.location: %v", ErrConfig, err)
		}
	}
	cfg := t.base.Clone()
	cfg.Certificates = []tls.Certificate{cert}
	if len(trust) > 0 {
		cfg.ClientCAs = x509.NewCertPool()
		if n := appendPEMCerts(cfg.ClientCAs, trust); n == 0 {
			return nil, fmt.Errorf("%w: truststore holds no PEM certificate", ErrConfig)
		}
	}
	return cfg, nil
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
func (t *TLS) Config() *tls.Config { return t.server }

// Principal maps a verified client certificate chain to a principal with
// ssl.principal.mapping.rules ("User:" + the mapped name); with no
// certificate it is Anonymous.
func (t *TLS) Principal(state tls.ConnectionState) string {
	if len(state.PeerCertificates) == 0 {
		return Anonymous
	}
	return "User:" + MapPrincipal(t.rules, state.PeerCertificates[0].Subject.String())
}
