package kafka

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/certs"
)

// The users of a SecureKafka.
const (
	// ScramUser has SCRAM-SHA-512 and SCRAM-SHA-256 credentials, made with
	// kafka-storage format --add-scram.
	ScramUser     = "alice"
	ScramPassword = "alice-Scram-5ecret"
	// PlainUser is a SASL/PLAIN user of the broker's JAAS configuration.
	PlainUser     = "bob"
	PlainPassword = "bob-Plain-5ecret"
)

// SecureKafka is an Apache Kafka broker with secured listeners beside its
// PLAINTEXT one: SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and SSL
// with ssl.client.auth=required, both from PEM key stores made by the certs
// package.
type SecureKafka struct {
	*Kafka
	// SASLSSL is the SASL_SSL listener's address.
	SASLSSL string
	// MTLS is the SSL listener's address; it requires a client certificate.
	MTLS string
	// CAFile is the PEM CA that signed the broker's and Client's certificates.
	CAFile string
	// Client is a client certificate (CN=sluice-client) the MTLS listener accepts.
	Client certs.Files
	// CertDir holds the PEM files.
	CertDir string
}

// StartSecureKafkaProcess makes the certificates in dir and starts the
// broker there; the caller stops it.
func StartSecureKafkaProcess(dir string) (*SecureKafka, error) {
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("sluice test CA")
	if err != nil {
		return nil, err
	}
	caFile, err := ca.Write(certDir, "ca")
	if err != nil {
		return nil, err
	}
	server, err := ca.Issue("kafka-broker", certs.Options{Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, err
	}
	serverFiles, err := server.Write(certDir, "broker")
	if err != nil {
		return nil, err
	}
	client, err := ca.Issue("sluice-client", certs.Options{})
	if err != nil {
		return nil, err
	}
	clientFiles, err := client.Write(certDir, "client")
	if err != nil {
		return nil, err
	}
	saslSSL := &Listener{Name: "SASL_SSL", Protocol: "SASL_SSL"}
	mtls := &Listener{Name: "SSL", Protocol: "SSL"}
	scram := "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	k, err := StartKafkaProcess(KafkaOptions{
		Dir:       dir,
		Listeners: []*Listener{saslSSL, mtls},
		Properties: map[string]string{
			"ssl.keystore.type":                                     "PEM",
			"ssl.keystore.location":                                 serverFiles.Combined,
			"ssl.truststore.type":                                   "PEM",
			"ssl.truststore.location":                               caFile,
			"listener.name.ssl.ssl.client.auth":                     "required",
			"sasl.enabled.mechanisms":                               "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
			"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
			"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
			"listener.name.sasl_ssl.plain.sasl.jaas.config": fmt.Sprintf(
				"org.apache.kafka.common.security.plain.PlainLoginModule required user_%s=\"%s\";", PlainUser, PlainPassword),
		},
		FormatArgs: []string{
			"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", ScramUser, ScramPassword),
			"--add-scram", fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", ScramUser, ScramPassword),
		},
	})
	if err != nil {
		return nil, err
	}
	return &SecureKafka{Kafka: k, SASLSSL: saslSSL.Addr(), MTLS: mtls.Addr(), CAFile: caFile, Client: clientFiles, CertDir: certDir}, nil
}

var sharedSecure struct {
	kafka *SecureKafka
	err   error
}

// SharedSecureKafka returns the test binary's one SecureKafka, starting it
// on first use (with retries for a port taken in between). The test
// package's TestMain must call Main so it is stopped.
func SharedSecureKafka(t testing.TB) *SecureKafka {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if sharedSecure.kafka == nil && sharedSecure.err == nil {
		dir, err := os.MkdirTemp("", "sluice-secure-kafka-")
		if err != nil {
			t.Fatal(err)
		}
		sharedSecure.kafka, sharedSecure.err = startRetrying(func() (string, error) { return os.MkdirTemp(dir, "attempt-") }, StartSecureKafkaProcess)
		if k := sharedSecure.kafka; k != nil {
			shared.cleanup = append(shared.cleanup, func() { k.Stop(); os.RemoveAll(dir) })
		} else {
			os.RemoveAll(dir)
		}
	}
	if sharedSecure.err != nil {
		t.Fatal(sharedSecure.err)
	}
	return sharedSecure.kafka
}

// StartSecureKafka starts a SecureKafka owned by this test and stopped at
// its cleanup.
func StartSecureKafka(t testing.TB) *SecureKafka {
	t.Helper()
	k, err := startRetrying(func() (string, error) { return os.MkdirTemp(t.TempDir(), "secure-kafka-") }, StartSecureKafkaProcess)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}
