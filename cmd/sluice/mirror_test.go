package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// TestMirrorToSASLTarget mirrors from a PLAINTEXT sluice broker to one that
// only has a SASL_PLAINTEXT (SCRAM-SHA-512) listener, the target's
// credentials in --to-command-config; `mirror status` reads the position
// through the same file. Without it the target refuses the mirror.
func TestMirrorToSASLTarget(t *testing.T) {
	dir := t.TempDir()
	if _, err := runSluiceIn(t, "mirror-secret\n", "users", "set", "mirror", "--mechanism", "SCRAM-SHA-512", "--password-stdin", "--data-dir", dir); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.FromProperties(map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
	if err != nil {
		t.Fatal(err)
	}
	dst := sluice.StartBroker(t, sluice.BrokerOptions{DataDir: dir, Config: &cfg})
	src := sluice.StartBroker(t, sluice.BrokerOptions{})
	if _, err := runSluiceIn(t, "", "topics", "create", "sec", "--partitions", "2", "--bootstrap", src.Addr); err != nil {
		t.Fatal(err)
	}
	if _, err := runSluiceIn(t, "a\nb\nc\nd\n", "produce", "--topic", "sec", "-q", "--bootstrap", src.Addr); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(t.TempDir(), "target.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" password=\"mirror-secret\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runSluiceIn(t, "", "mirror", "--from", src.Addr, "--to", dst.Addr, "--to-command-config", props,
		"--topics", "sec", "--name", "sasl", "--exit-when-caught-up", "--progress-interval", "0", "--log-level", "warn"); err != nil {
		t.Fatalf("mirror to the SASL target: %v", err)
	}
	got, err := runSluiceIn(t, "", "consume", "--topic", "sec", "-e", "-q", "--bootstrap", dst.Addr, "--command-config", props)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(got)
	sort.Strings(lines)
	if strings.Join(lines, ",") != "a,b,c,d" {
		t.Fatalf("the target holds %q, want a, b, c and d", got)
	}
	out, err := runSluiceIn(t, "", "mirror", "status", "--name", "sasl", "--to", dst.Addr, "--to-command-config", props, "--from", src.Addr)
	if err != nil || !strings.Contains(out, "sec") {
		t.Fatalf("mirror status: %v\n%s", err, out)
	}
}
