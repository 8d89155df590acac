package jobs

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/internal/kafka"
)

// Security is source.security: how the loader reaches a secured cluster,
// in Kafka's terms. The spec holds no secret: the SASL password comes from
// a file or an environment variable read when the job opens, so the spec
// text (stored with the scheduler's jobs, hashed into fingerprints) never
// carries it.
//
//	source:
//	  security:
//	    protocol: SASL_SSL                 # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
//	    sasl: {mechanism: SCRAM-SHA-512, username: loader, password_file: /etc/sluice/loader.pw}
//	    tls:  {ca: /etc/sluice/ca.pem, cert: client.pem, key: client.key, server_name: kafka.internal}
type Security struct {
	// Protocol is Kafka's security.protocol (default PLAINTEXT).
	Protocol string `yaml:"protocol"`
	// SASL are the credentials of SASL_SSL and SASL_PLAINTEXT.
	SASL SASL `yaml:"sasl"`
	// TLS are the PEM files of SSL and SASL_SSL.
	TLS TLS `yaml:"tls"`
}

// SASL is source.security.sasl.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	// Username is the SASL user.
	Username string `yaml:"username"`
	// PasswordFile holds the password on its first line; relative to the
	// spec's directory.
	PasswordFile string `yaml:"password_file"`
	// PasswordEnv names the environment variable holding the password.
	PasswordEnv string `yaml:"password_env"`
}

// TLS is source.security.tls. Relative paths start at the spec's directory.
type TLS struct {
	// CA is a PEM file of the CAs that sign the brokers' certificates
	// (default: the system's).
	CA string `yaml:"ca"`
	// Cert and Key are the PEM client certificate and key (mTLS).
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is checked against the brokers' certificates instead of
	// the host dialled.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify checks nothing about the brokers' certificates
	// (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// securityFieldName names a kafka.Security field by its spec key.
func securityFieldName(f kafka.SecurityField) string {
	if f == kafka.FieldPassword {
		return "source.security.sasl.password_file"
	}
	return "source.security." + string(f)
}

func (s *Spec) path(p string) string {
	if p == "" || filepath.IsAbs(p) || s.dir == "" {
		return p
	}
	return filepath.Join(s.dir, p)
}

// security returns source.security as a kafka.Security; with
// readPassword false the password is a stand-in (for checking the spec
// where the password file may not be).
func (s *Spec) security(readPassword bool) (kafka.Security, error) {
	src := s.Source.Security
	sec := kafka.Security{
		Protocol: src.Protocol, Mechanism: src.SASL.Mechanism, Username: src.SASL.Username,
		CA: s.path(src.TLS.CA), Cert: s.path(src.TLS.Cert), Key: s.path(src.TLS.Key),
		ServerName: src.TLS.ServerName, InsecureSkipVerify: src.TLS.InsecureSkipVerify,
	}
	switch {
	case src.SASL.PasswordFile != "" && src.SASL.PasswordEnv != "":
		return sec, fmt.Errorf("%w: source.security.sasl: give password_file or password_env, not both", ErrSpec)
	case !readPassword && (src.SASL.PasswordFile != "" || src.SASL.PasswordEnv != ""):
		sec.Password = "stand-in"
	case src.SASL.PasswordFile != "" || src.SASL.PasswordEnv != "":
		pw, err := s.readPassword("source.security.sasl", src.SASL.PasswordFile, src.SASL.PasswordEnv)
		if err != nil {
			return sec, err
		}
		sec.Password = pw
	}
	if err := sec.Check(); err != nil {
		var se *kafka.SecurityError
		if errors.As(err, &se) && se.Field == kafka.FieldPassword && !sec.UsesSASL() {
			return sec, fmt.Errorf("%w: source.security.sasl.password_file: a SASL password is set but the security protocol is %s (use SASL_SSL or SASL_PLAINTEXT)", ErrSpec, sec.Normalized().Protocol)
		}
		return sec, fmt.Errorf("%w: %w", ErrSpec, kafka.Named(err, securityFieldName))
	}
	return sec.Normalized(), nil
}

// KafkaSecurity returns the source's security with the password read:
// what the loader's clients use.
func (s *Spec) KafkaSecurity() (kafka.Security, error) { return s.security(true) }

func (s *Spec) validateSecurity() error {
	_, err := s.security(false)
	return err
}

// RegistryAuth is decode.registry_auth: how the loader authenticates to a
// schema registry that requires it (HTTP basic auth, Confluent's
// basic.auth.user.info) and which CA signs its https certificate.
//
//	decode:
//	  registry: https://registry.internal:8081
//	  registry_auth: {username: loader, password_file: registry.pw, ca: ca.pem}
type RegistryAuth struct {
	// Username and the password's source, as in source.security.sasl.
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
	// CA is a PEM file of the CAs that sign the registry's certificate.
	CA string `yaml:"ca"`
	// Cert and Key are a PEM client certificate and key, for a registry
	// that asks for one.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

func (s *Spec) validateRegistryAuth() error {
	a := s.Decode.RegistryAuth
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: decode.registry_auth.%s: %s", ErrSpec, field, fmt.Sprintf(format, args...))
	}
	switch {
	case a == RegistryAuth{}:
		return nil
	case s.Decode.Registry == "":
		return fmt.Errorf("%w: decode.registry_auth: there is no decode.registry to authenticate to", ErrSpec)
	case a.PasswordFile != "" && a.PasswordEnv != "":
		return bad("password_file", "give password_file or password_env, not both")
	case a.Username == "" && (a.PasswordFile != "" || a.PasswordEnv != ""):
		return bad("username", "missing: a password needs its user")
	case a.Username != "" && a.PasswordFile == "" && a.PasswordEnv == "":
		return bad("password_file", "missing: give password_file or password_env for user %q", a.Username)
	case (a.Cert == "") != (a.Key == ""):
		return bad("key", "cert and key go together")
	}
	return nil
}

// readPassword reads a password from file (relative to the spec's
// directory) or, without one, the environment variable env; errors name
// field's password_file or password_env.
func (s *Spec) readPassword(field, file, env string) (kafka.Secret, error) {
	if file != "" {
		pw, err := kafka.ReadPasswordFile(s.path(file))
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrSpec, kafka.Named(err, func(kafka.SecurityField) string { return field + ".password_file" }))
		}
		return pw, nil
	}
	pw, ok := os.LookupEnv(env)
	if !ok || pw == "" {
		return "", fmt.Errorf("%w: %s.password_env: $%s is not set", ErrSpec, field, env)
	}
	return kafka.Secret(pw), nil
}

// registryClientOptions are the sr client options of decode.registry_auth,
// with the password read.
func (s *Spec) registryClientOptions() ([]sr.ClientOpt, error) {
	a := s.Decode.RegistryAuth
	var opts []sr.ClientOpt
	if a.Username != "" {
		pw, err := s.readPassword("decode.registry_auth", a.PasswordFile, a.PasswordEnv)
		if err != nil {
			return nil, err
		}
		opts = append(opts, sr.BasicAuth(a.Username, pw.Reveal()))
	}
	if a.CA != "" || a.Cert != "" {
		// The TLS files are checked as kafka.Security checks them.
		cfg, err := kafka.Security{Protocol: kafka.SSL, CA: s.path(a.CA), Cert: s.path(a.Cert), Key: s.path(a.Key)}.TLSConfig()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSpec, kafka.Named(err, func(f kafka.SecurityField) string {
				return "decode.registry_auth." + strings.TrimPrefix(string(f), "tls.")
			}))
		}
		opts = append(opts, sr.HTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}}))
	}
	return opts, nil
}
