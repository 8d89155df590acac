package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/certs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The tools against a secured Apache Kafka 4.1: SASL_SSL with
// SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN, SSL with a client certificate
// (mTLS), a Kafka client properties file; and each way of getting it wrong
// refused with an error that says why.
func TestToolsAgainstSecureKafka(t *testing.T) {
	k := kafka.StartSecureKafka(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	scramPW := write("alice.pw", kafka.ScramPassword+"\n")
	plainPW := write("bob.pw", kafka.PlainPassword+"\n")
	wrongPW := write("wrong.pw", "not-the-password\n")
	scram := func(mech, pwFile string) []string {
		return []string{"--bootstrap", k.SASLSSL, "--security-protocol", "SASL_SSL", "--sasl-mechanism", mech,
			"--sasl-username", kafka.ScramUser, "--sasl-password-file", pwFile, "--tls-ca", k.CAFile}
	}
	mtls := []string{"--bootstrap", k.MTLS, "--security-protocol", "SSL", "--tls-ca", k.CAFile,
		"--tls-cert", k.Client.Cert, "--tls-key", k.Client.Key}
	props := write("client.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\""+kafka.PlainUser+"\" password=\""+kafka.PlainPassword+"\";\n"+
		"ssl.truststore.type=PEM\nssl.truststore.location="+k.CAFile+"\n")

	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := runSluiceIn(t, stdin, args...)
		if err != nil {
			t.Fatalf("sluice %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	must("", append([]string{"topics", "create", "secure", "--partitions", "2"}, scram("SCRAM-SHA-512", scramPW)...)...)
	must("a\nb\nc\n", append([]string{"produce", "--topic", "secure", "-q"}, scram("SCRAM-SHA-512", scramPW)...)...)
	must("d\n", append([]string{"produce", "--topic", "secure", "-q"}, mtls...)...)
	must("e\n", "produce", "--topic", "secure", "-q", "--bootstrap", k.SASLSSL, "--command-config", props)
	want := "a\nb\nc\nd\ne\n"
	sorted := func(s string) string {
		l := strings.Split(strings.TrimSpace(s), "\n")
		for i := range l {
			for j := i + 1; j < len(l); j++ {
				if l[j] < l[i] {
					l[i], l[j] = l[j], l[i]
				}
			}
		}
		return strings.Join(l, "\n") + "\n"
	}
	for name, args := range map[string][]string{
		"SCRAM-SHA-512": scram("SCRAM-SHA-512", scramPW),
		"SCRAM-SHA-256": scram("SCRAM-SHA-256", scramPW),
		"PLAIN": {"--bootstrap", k.SASLSSL, "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN",
			"--sasl-username", kafka.PlainUser, "--sasl-password-file", plainPW, "--tls-ca", k.CAFile},
		"mTLS":           mtls,
		"command-config": {"--bootstrap", k.SASLSSL, "--command-config", props},
	} {
		got := must("", append([]string{"consume", "--topic", "secure", "-e", "-q"}, args...)...)
		if sorted(got) != want {
			t.Errorf("consume over %s: got %q, want %q", name, got, want)
		}
	}
	if out := must("", append([]string{"topics", "list"}, mtls...)...); !strings.Contains(out, "secure") {
		t.Errorf("topics list over mTLS: %q", out)
	}

	// A CA that did not sign the broker's certificate, and a client
	// certificate from it.
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherCA, _ := other.Write(dir, "other-ca")
	stranger, _ := other.Issue("stranger", certs.Options{})
	strangerFiles, _ := stranger.Write(dir, "stranger")

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong password", scram("SCRAM-SHA-512", wrongPW), "authentication failed"},
		{"unknown user", []string{"--bootstrap", k.SASLSSL, "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-username", "mallory", "--sasl-password-file", scramPW, "--tls-ca", k.CAFile}, "authentication failed"},
		{"untrusted CA", []string{"--bootstrap", k.SASLSSL, "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
			"--sasl-username", kafka.ScramUser, "--sasl-password-file", scramPW, "--tls-ca", otherCA}, "certificate signed by unknown authority"},
		{"mTLS without a client certificate", []string{"--bootstrap", k.MTLS, "--security-protocol", "SSL", "--tls-ca", k.CAFile}, "certificate"},
		{"mTLS with a stranger's certificate", []string{"--bootstrap", k.MTLS, "--security-protocol", "SSL", "--tls-ca", k.CAFile,
			"--tls-cert", strangerFiles.Cert, "--tls-key", strangerFiles.Key}, "certificate"},
		{"plaintext client on the TLS port", []string{"--bootstrap", k.SASLSSL}, ""},
	} {
		_, err := runSluiceIn(t, "", append([]string{"topics", "list", "--timeout", "15s"}, c.args...)...)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), c.want) {
			t.Errorf("%s: got %v, want an error naming %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
		if strings.Contains(errString(err), kafka.ScramPassword) || strings.Contains(errString(err), "not-the-password") {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Flags that cannot work together are refused before connecting, naming
// the flag.
func TestSecurityFlagsBadInput(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("secret\n"), 0o600)
	props := filepath.Join(dir, "jks.properties")
	os.WriteFile(props, []byte("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topics", "list", "--security-protocol", "TLS"}, `--security-protocol: unknown security protocol "TLS"`},
		{[]string{"topics", "list", "--sasl-mechanism", "PLAIN"}, "--sasl-mechanism: a SASL mechanism is set but the security protocol is PLAINTEXT"},
		{[]string{"produce", "-t", "x", "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN", "--sasl-username", "u"}, "--sasl-password-file: SASL_SSL with PLAIN needs a password"},
		{[]string{"consume", "-t", "x", "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-1", "--sasl-username", "u", "--sasl-password-file", pw}, `--sasl-mechanism: unknown SASL mechanism "SCRAM-SHA-1"`},
		{[]string{"bench", "produce", "--tls-ca", "ca.pem"}, "--tls-ca: a TLS setting is given but the security protocol is PLAINTEXT"},
		{[]string{"bench", "consume", "--security-protocol", "SSL", "--tls-cert", "c.pem"}, "--tls-key: a client certificate is given without its key"},
		{[]string{"groups", "list", "--security-protocol", "SSL", "--tls-ca", filepath.Join(dir, "missing.pem")}, "--tls-ca: open"},
		{[]string{"cluster", "status", "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN", "--sasl-username", "u", "--sasl-password-file", filepath.Join(dir, "nope")}, "--sasl-password-file: open"},
		{[]string{"transactions", "list", "--command-config", props}, "ssl.truststore.type JKS is not supported"},
		{[]string{"registry", "--security-protocol", "SASL_PLAINTEXT"}, "--sasl-mechanism: SASL_PLAINTEXT needs a SASL mechanism"},
	} {
		_, err := runSluiceIn(t, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("sluice %s: got %v, want one line with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
