package jobs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/certs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// TestLoadRunFromSecureKafka: `sluice load run` (the built binary) loads a
// topic of Apache Kafka 4.1 over SASL_SSL with SCRAM-SHA-512 (the password
// from a file) exactly once, read back with DuckDB; a second run from the
// SSL listener with a client certificate (mTLS) finds nothing new. Neither
// the password nor anything derived from the spec's password source appears
// in any file the loads wrote, in their output and logs, or in `load plan`.
func TestLoadRunFromSecureKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k := kafka.StartSecureKafka(t)
	recs, _ := pageViews(t, "secure-pv", 900, 3, 2*time.Hour, -1)
	counts := produceAll(t, ctx, k.Addr, "secure-pv", 3, recs)

	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.WriteFile(filepath.Join(dir, "loader.pw"), []byte(kafka.ScramPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	job := func(bootstrap string) string {
		return writeJobFile(t, dir, fmt.Sprintf(pageViewJob, "pv-secure", bootstrap, "secure-pv", 200, "schema_file: pageview.avsc", "file://"+out))
	}
	// The spec names the password file relative to its directory and the CA
	// absolutely.
	scramSpec := strings.Replace(readFile(t, job(k.SASLSSL)), "  start: earliest\n", fmt.Sprintf(`  start: earliest
  security:
    protocol: SASL_SSL
    sasl: {mechanism: SCRAM-SHA-512, username: %s, password_file: loader.pw}
    tls: {ca: %s}
`, kafka.ScramUser, k.CAFile), 1)
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte(scramSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, kafka.SluiceBinary(t), args...)
		msg, err := cmd.CombinedOutput()
		logs.Write(msg)
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, msg)
		}
	}
	run("load", "plan", specPath)
	run("load", "run", specPath)
	checkExactlyOnce(t, out, "secure-pv", counts, true)

	// The same job over mTLS: nothing new to load, nothing loaded twice.
	mtlsSpec := strings.Replace(readFile(t, job(k.MTLS)), "  start: earliest\n", fmt.Sprintf(`  start: earliest
  security:
    protocol: SSL
    tls: {ca: %s, cert: %s, key: %s}
`, k.CAFile, k.Client.Cert, k.Client.Key), 1)
	if err := os.WriteFile(specPath, []byte(mtlsSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	run("load", "run", specPath)
	run("checkpoints", "list", specPath)
	checkExactlyOnce(t, out, "secure-pv", counts, true)

	// No file the loads wrote, and nothing they printed, holds the password.
	if strings.Contains(logs.String(), kafka.ScramPassword) {
		t.Errorf("the password shows in the commands' output:\n%s", logs.String())
	}
	var scanned int
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		scanned++
		if b, _ := os.ReadFile(p); strings.Contains(string(b), kafka.ScramPassword) {
			t.Errorf("the password is stored in %s", p)
		}
		return nil
	})
	if scanned < 4 {
		t.Errorf("scanned only %d files under %s", scanned, out)
	}
	t.Logf("%d records loaded over SASL_SSL; %d files scanned for the password", len(recs), scanned)

	// A wrong password: the run fails, saying the authentication failed.
	if err := os.WriteFile(filepath.Join(dir, "loader.pw"), []byte("wrong-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specPath, []byte(scramSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	msg, err := exec.CommandContext(ctx, kafka.SluiceBinary(t), "load", "run", "--quiet", specPath).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "SASL_AUTHENTICATION_FAILED") || strings.Contains(string(msg), "wrong-password") {
		t.Errorf("load run with a wrong password: %v\n%s", err, msg)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// source.security mistakes are refused naming the key; the password
// comes from password_file or password_env and never from the spec.
func TestSourceSecuritySpec(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n"), 0o600)
	spec := func(security string) string {
		return "name: j\nsource:\n  topics: [t]\n  security: " + security + "\ndecode: {format: string}\noutput: {uri: /tmp/x}\n"
	}
	for _, c := range []struct{ security, want string }{
		{"{protocol: TLS}", `source.security.protocol: unknown security protocol "TLS"`},
		{"{protocol: SASL_SSL}", "source.security.sasl.mechanism: SASL_SSL needs a SASL mechanism"},
		{"{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u}}", "source.security.sasl.password_file: SASL_SSL with PLAIN needs a password"},
		{"{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u, password_file: pw, password_env: PW}}", "give password_file or password_env, not both"},
		{"{sasl: {mechanism: PLAIN}}", "source.security.sasl.mechanism: a SASL mechanism is set but the security protocol is PLAINTEXT"},
		{"{sasl: {password_file: pw}}", "source.security.sasl.password_file: a SASL password is set but the security protocol is PLAINTEXT"},
		{"{tls: {ca: ca.pem}}", "source.security.tls.ca: a TLS setting is given but the security protocol is PLAINTEXT"},
		{"{protocol: SSL, tls: {cert: c.pem}}", "source.security.tls.key: a client certificate is given without its key"},
		{"{protocol: SSL, tls: {insecure: true}}", "source.security.tls.insecure: unknown key"},
		{"{protocol: SASL_SSL, sasl: {mechanism: PLAIN, username: u, password: s3cret}}", "source.security.sasl.password: unknown key"},
	} {
		_, err := jobs.ParseSpec([]byte(spec(c.security)), dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, jobs.ErrSpec) {
			t.Errorf("%s: got %v, want ...%s...", c.security, err, c.want)
		}
	}
	for _, c := range []struct{ decode, want string }{
		{"{format: string, registry_auth: {username: u, password_file: pw}}", "decode.registry_auth: there is no decode.registry"},
		{"{format: avro, registry: http://r, registry_auth: {username: u}}", "decode.registry_auth.password_file: missing"},
		{"{format: avro, registry: http://r, registry_auth: {password_env: X}}", "decode.registry_auth.username: missing"},
		{"{format: avro, registry: http://r, registry_auth: {cert: c.pem}}", "decode.registry_auth.key: cert and key go together"},
		{"{format: avro, registry: http://r, registry_auth: {username: u, password: p}}", "decode.registry_auth.password: unknown key"},
	} {
		_, err := jobs.ParseSpec([]byte("name: j\nsource: {topics: [t]}\ndecode: "+c.decode+"\noutput: {uri: /tmp/x}\n"), dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, jobs.ErrSpec) {
			t.Errorf("%s: got %v, want ...%s...", c.decode, err, c.want)
		}
	}
	s, err := jobs.ParseSpec([]byte(spec("{protocol: sasl_ssl, sasl: {mechanism: SCRAM-SHA-256, username: u, password_file: pw}}")), dir)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := s.KafkaSecurity()
	if err != nil || sec.Password.Reveal() != "s3cret" || sec.Protocol != "SASL_SSL" {
		t.Errorf("password_file relative to the spec: %+v %v", sec, err)
	}
	t.Setenv("SLUICE_TEST_PW", "from-env")
	s, err = jobs.ParseSpec([]byte(spec("{protocol: SASL_PLAINTEXT, sasl: {mechanism: PLAIN, username: u, password_env: SLUICE_TEST_PW}}")), dir)
	if err != nil {
		t.Fatal(err)
	}
	if sec, err := s.KafkaSecurity(); err != nil || sec.Password.Reveal() != "from-env" {
		t.Errorf("password_env: %v", err)
	}
	s, _ = jobs.ParseSpec([]byte(spec("{protocol: SASL_PLAINTEXT, sasl: {mechanism: PLAIN, username: u, password_env: SLUICE_TEST_UNSET}}")), dir)
	if _, err := s.KafkaSecurity(); err == nil || !strings.Contains(err.Error(), "source.security.sasl.password_env: $SLUICE_TEST_UNSET is not set") {
		t.Errorf("unset password_env: %v", err)
	}
	if fp1, fp2 := jobs.SpecFingerprint(s), jobs.SpecFingerprint(mustSpec(t, spec("{}"), dir)); fp1 != fp2 {
		t.Errorf("source.security changes the fingerprint: %s vs %s", fp1, fp2)
	}
}

func mustSpec(t *testing.T, text, dir string) *jobs.Spec {
	t.Helper()
	s, err := jobs.ParseSpec([]byte(text), dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLoadFromAuthenticatedRegistry: the loader decodes Confluent-framed
// Avro through a `sluice registry` serving HTTPS with basic auth and
// per-subject grants, with decode.registry_auth (password from a file);
// a wrong password fails the run with the registry's 401, and the
// password is in nothing the run wrote.
func TestLoadFromAuthenticatedRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	dir := t.TempDir()
	ca, err := certs.NewCA("registry CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.Write(dir, "ca")
	srv, _ := ca.Issue("registry", certs.Options{Hosts: []string{"127.0.0.1"}})
	srvFiles, err := srv.Write(dir, "registry")
	if err != nil {
		t.Fatal(err)
	}
	const writerPW, loaderPW = "writer-Pw-91", "loader-Pw-27"
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passwords := write("registry.passwords", "writer:plain:"+writerPW+"\nloader:plain:"+loaderPW+"\n")
	roles := write("registry.roles", "writer * write\nloader authpv- read\n")
	write("loader.pw", loaderPW+"\n")
	port, err := kafka.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	reg := exec.CommandContext(ctx, kafka.SluiceBinary(t), "registry", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--bootstrap", b.Addr,
		"--registry-tls-cert", srvFiles.Cert, "--registry-tls-key", srvFiles.Key, "--registry-password-file", passwords, "--registry-roles-file", roles)
	var regOut strings.Builder
	reg.Stdout, reg.Stderr = &regOut, &regOut
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Process.Kill(); reg.Wait() })
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cl, err := sr.NewClient(sr.URLs(url), sr.BasicAuth("writer", writerPW),
		sr.HTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}))
	if err != nil {
		t.Fatal(err)
	}
	_, text := pageViewSchema(t)
	var id int
	for deadline := time.Now().Add(60 * time.Second); ; {
		ss, err := cl.CreateSchema(ctx, "authpv-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err == nil {
			id = ss.ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice registry did not answer at %s: %v\n%s", url, err, regOut.String())
		}
		time.Sleep(100 * time.Millisecond) // polling the registry's start, bounded by the deadline
	}
	recs, _ := pageViews(t, "authpv", 300, 2, time.Hour, id)
	counts := produceAll(t, ctx, b.Addr, "authpv", 2, recs)

	out := filepath.Join(dir, "out")
	spec := writeJobFile(t, dir, fmt.Sprintf(pageViewJob, "pv-registry-auth", b.Addr, "authpv", 100,
		fmt.Sprintf("registry: %s\n  registry_auth: {username: loader, password_file: loader.pw, ca: %s}", url, caFile), "file://"+out))
	msg, err := exec.CommandContext(ctx, kafka.SluiceBinary(t), "load", "run", "--quiet", spec).CombinedOutput()
	if err != nil {
		t.Fatalf("load run: %v\n%s", err, msg)
	}
	checkExactlyOnce(t, out, "authpv", counts, true)
	if strings.Contains(string(msg), loaderPW) {
		t.Errorf("load run printed the registry password:\n%s", msg)
	}
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), loaderPW) {
				t.Errorf("the registry password is stored in %s", p)
			}
		}
		return err
	})

	// A wrong password: the run fails on the registry's 401 (Unauthorized).
	write("loader.pw", "wrong\n")
	recs2, _ := pageViews(t, "authpv", 10, 2, time.Hour, id)
	produceAll(t, ctx, b.Addr, "authpv", 0, recs2)
	msg, err = exec.CommandContext(ctx, kafka.SluiceBinary(t), "load", "run", "--quiet", spec).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "schema registry: schema id 1: Unauthorized") {
		t.Errorf("load run with a wrong registry password: %v\n%s", err, msg)
	}
}
