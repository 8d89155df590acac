package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security protocols, in Kafka's names (security.protocol).
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"
)

// SASL mechanisms, in Kafka's names (sasl.mechanism).
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
)

// Secret is a password. It prints, logs and marshals as "[redacted]", so a
// Security value put in a log line, a report or an error by mistake does not
// give it away; Reveal returns the text.
type Secret string

const redacted = "[redacted]"

// String returns "[redacted]" (or "" for an empty secret).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// MarshalText is String, for JSON, YAML and slog's text and JSON handlers.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Reveal returns the secret's text, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// Security says how a client reaches a secured cluster: Kafka's
// security.protocol, the SASL mechanism and credentials, and the TLS files.
// The zero value is PLAINTEXT. The same struct backs the command-line flags
// (SecurityFlagNames), a Kafka client properties file (ParseClientProperties)
// and the job spec's source.security (SecurityFieldNames).
type Security struct {
	// Protocol is PLAINTEXT (empty), SSL, SASL_PLAINTEXT or SASL_SSL.
	Protocol string
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; SASL protocols only.
	Mechanism string
	// Username is the SASL user.
	Username string
	// Password is the SASL password (see ReadPasswordFile).
	Password Secret
	// CA is a PEM file of the certificate authorities trusted for the
	// brokers' certificates; empty trusts the system's.
	CA string
	// Cert and Key are the PEM client certificate (chain) and its private
	// key, for brokers that require client certificates (mTLS). They may
	// name the same file holding both.
	Cert, Key string
	// ServerName, when set, is the name checked against every broker's
	// certificate instead of the host dialled.
	ServerName string
	// SkipHostnameVerification checks the broker's chain against CA but not
	// its host name (Kafka's ssl.endpoint.identification.algorithm= empty).
	SkipHostnameVerification bool
	// InsecureSkipVerify checks nothing about the broker's certificate
	// (tests only).
	InsecureSkipVerify bool
}

// SecurityField names a Security setting in errors. Field names are the
// job spec's keys under source.security; a command maps them to its flags.
type SecurityField string

// The settings of Security, as the job spec spells them.
const (
	FieldProtocol   SecurityField = "protocol"
	FieldMechanism  SecurityField = "sasl.mechanism"
	FieldUsername   SecurityField = "sasl.username"
	FieldPassword   SecurityField = "sasl.password"
	FieldCA         SecurityField = "tls.ca"
	FieldCert       SecurityField = "tls.cert"
	FieldKey        SecurityField = "tls.key"
	FieldServerName SecurityField = "tls.server_name"
	FieldInsecure   SecurityField = "tls.insecure_skip_verify"
)

// SecurityFlagNames are the command-line flags of each field.
var SecurityFlagNames = map[SecurityField]string{
	FieldProtocol:   "--security-protocol",
	FieldMechanism:  "--sasl-mechanism",
	FieldUsername:   "--sasl-username",
	FieldPassword:   "--sasl-password-file",
	FieldCA:         "--tls-ca",
	FieldCert:       "--tls-cert",
	FieldKey:        "--tls-key",
	FieldServerName: "--tls-server-name",
	FieldInsecure:   "--tls-insecure-skip-verify",
}

// SecurityError is a Security setting that cannot work. It wraps ErrBadInput.
type SecurityError struct {
	// Field is the setting at fault.
	Field SecurityField
	// Name is how the user spelled it (a flag, a spec key); Field when empty.
	Name string
	// Reason says what is wrong and what to do.
	Reason string
}

func (e *SecurityError) Error() string {
	name := e.Name
	if name == "" {
		name = string(e.Field)
	}
	return name + ": " + e.Reason
}

// Unwrap returns ErrBadInput.
func (e *SecurityError) Unwrap() error { return ErrBadInput }

// Named returns err with every SecurityError's Name set from names (a
// SecurityFlagNames-like map, or a prefix function's result).
func Named(err error, name func(SecurityField) string) error {
	var se *SecurityError
	if err == nil || name == nil || !errors.As(err, &se) {
		return err
	}
	c := *se
	c.Name = name(se.Field)
	return &c
}

// FlagName names a field by its command-line flag.
func FlagName(f SecurityField) string { return SecurityFlagNames[f] }

func secErr(f SecurityField, format string, args ...any) error {
	return &SecurityError{Field: f, Reason: fmt.Sprintf(format, args...)}
}

// UsesTLS reports whether the protocol encrypts (SSL, SASL_SSL).
func (s Security) UsesTLS() bool { return s.protocol() == SSL || s.protocol() == SASLSSL }

// UsesSASL reports whether the protocol authenticates with SASL.
func (s Security) UsesSASL() bool { return s.protocol() == SASLPlaintext || s.protocol() == SASLSSL }

func (s Security) protocol() string {
	p := strings.ToUpper(strings.TrimSpace(s.Protocol))
	if p == "" {
		return Plaintext
	}
	return p
}

// Normalized returns s with the protocol and mechanism upper-cased and an
// empty protocol made PLAINTEXT.
func (s Security) Normalized() Security {
	s.Protocol = s.protocol()
	s.Mechanism = strings.ToUpper(strings.TrimSpace(s.Mechanism))
	return s
}

// Check reports the first setting that cannot work as a *SecurityError:
// an unknown protocol or mechanism, SASL settings without a SASL protocol
// (or the reverse), TLS files without a TLS protocol, a certificate without
// its key. It reads no file.
func (s Security) Check() error {
	s = s.Normalized()
	switch s.Protocol {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
	default:
		return secErr(FieldProtocol, "unknown security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s.Protocol)
	}
	if s.UsesSASL() {
		switch s.Mechanism {
		case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		case "":
			return secErr(FieldMechanism, "%s needs a SASL mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Protocol)
		default:
			return secErr(FieldMechanism, "unknown SASL mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", s.Mechanism)
		}
		if s.Username == "" {
			return secErr(FieldUsername, "%s with %s needs a user name", s.Protocol, s.Mechanism)
		}
		if s.Password == "" {
			return secErr(FieldPassword, "%s with %s needs a password (an empty password file?)", s.Protocol, s.Mechanism)
		}
	} else {
		switch {
		case s.Mechanism != "":
			return secErr(FieldMechanism, "a SASL mechanism is set but the security protocol is %s (use SASL_SSL or SASL_PLAINTEXT)", s.Protocol)
		case s.Username != "":
			return secErr(FieldUsername, "a SASL user is set but the security protocol is %s (use SASL_SSL or SASL_PLAINTEXT)", s.Protocol)
		case s.Password != "":
			return secErr(FieldPassword, "a SASL password is set but the security protocol is %s (use SASL_SSL or SASL_PLAINTEXT)", s.Protocol)
		}
	}
	if !s.UsesTLS() {
		for _, f := range []struct {
			field SecurityField
			set   bool
		}{{FieldCA, s.CA != ""}, {FieldCert, s.Cert != ""}, {FieldKey, s.Key != ""}, {FieldServerName, s.ServerName != ""}, {FieldInsecure, s.InsecureSkipVerify}} {
			if f.set {
				return secErr(f.field, "a TLS setting is given but the security protocol is %s (use SSL or SASL_SSL)", s.Protocol)
			}
		}
	}
	if (s.Cert == "") != (s.Key == "") {
		if s.Cert == "" {
			return secErr(FieldCert, "a client key is given without its certificate")
		}
		return secErr(FieldKey, "a client certificate is given without its key")
	}
	return nil
}

// TLSConfig builds the client's TLS configuration from the CA, certificate
// and key files; nil when the protocol does not use TLS. Errors name the
// field and the file.
func (s Security) TLSConfig() (*tls.Config, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	if !s.UsesTLS() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CA != "" {
		b, err := os.ReadFile(s.CA)
		if err != nil {
			return nil, secErr(FieldCA, "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, secErr(FieldCA, "%s holds no PEM certificate", s.CA)
		}
		cfg.RootCAs = pool
	}
	if s.Cert != "" {
		pair, err := tls.LoadX509KeyPair(s.Cert, s.Key)
		if err != nil {
			return nil, secErr(FieldCert, "client certificate %s with key %s: %v", s.Cert, s.Key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	switch {
	case s.InsecureSkipVerify:
		cfg.InsecureSkipVerify = true
	case s.SkipHostnameVerification:
		// Verify the chain against the roots, not the name.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// Mechanism returns the franz-go SASL mechanism; nil when the protocol does
// not use SASL.
func (s Security) saslMechanism() sasl.Mechanism {
	s = s.Normalized()
	if !s.UsesSASL() {
		return nil
	}
	switch s.Mechanism {
	case MechanismPlain:
		return plain.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsMechanism()
	case MechanismScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha256Mechanism()
	default:
		return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha512Mechanism()
	}
}

// Options returns the franz-go options that make a client use s: a TLS
// dialer and a SASL mechanism. Every client sluice builds (the tools, the
// loader, the registry's store) takes its security from here.
func (s Security) Options() ([]kgo.Opt, error) {
	cfg, err := s.TLSConfig()
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if cfg != nil {
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(dialer.DialContext))
	}
	if m := s.saslMechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// ClientOptions are the options every client of the tools starts from: the
// seed brokers of bootstrap (SplitBootstrap) and the security of sec.
func ClientOptions(bootstrap string, sec Security) ([]kgo.Opt, error) {
	seeds, err := SplitBootstrap(bootstrap)
	if err != nil {
		return nil, err
	}
	opts, err := sec.Options()
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...), nil
}

// maxPasswordFile bounds a password file: a password is a line, not a
// file someone pointed at by mistake.
const maxPasswordFile = 4 << 10

// ReadPasswordFile returns the first line of path (without its line end):
// the password kept out of command lines, environments and job specs.
func ReadPasswordFile(path string) (Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", secErr(FieldPassword, "%v", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", secErr(FieldPassword, "%v", err)
	}
	n := len(buf)
	if n > maxPasswordFile {
		return "", secErr(FieldPassword, "%s is larger than %d bytes: not a password file", path, maxPasswordFile)
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", secErr(FieldPassword, "%s: the first line is empty", path)
	}
	return Secret(line), nil
}
