package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/broker"
	"github.com/sluicehq/sluice/broker/config"
)

// TestACLsCommandRoundTrip: the first admin made offline (users set
// --data-dir) is the super user of a broker with the authorizer on;
// through `sluice acls add` it lets alice write a topic, `acls list` shows
// the ACL, alice produces, `acls remove --force` takes it away and alice
// is refused (TOPIC_AUTHORIZATION_FAILED).
func TestACLsCommandRoundTrip(t *testing.T) {
	dir := t.TempDir()
	run := func(stdin string, args ...string) (string, error) {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	must("admin-secret\n", "users", "set", "admin", "--password-stdin", "--data-dir", dir)
	cfg, err := config.FromProperties(map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Options{DataDir: dir, Listen: "127.0.0.1:0", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	pw := filepath.Join(t.TempDir(), "admin.pw")
	if err := os.WriteFile(pw, []byte("admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	asAdmin := []string{"--bootstrap", b.Addr().String(), "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "admin", "--sasl-password-file", pw}
	must("alice-secret\n", append([]string{"users", "set", "alice", "--password-stdin"}, asAdmin...)...)

	produce := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
			kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr()
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice before any ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	must("", append([]string{"acls", "add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Create", "--topic", "orders"}, asAdmin...)...)
	list := must("", append([]string{"acls", "list", "--topic", "orders"}, asAdmin...)...)
	for _, want := range []string{"resourceType=TOPIC, name=orders, patternType=LITERAL", "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW",
		"operation=CREATE"} {
		if !strings.Contains(list, want) {
			t.Fatalf("acls list lacks %q:\n%s", want, list)
		}
	}
	if err := produce(); err != nil {
		t.Fatalf("alice with WRITE and CREATE on orders: %v", err)
	}
	if out, err := run("", append([]string{"acls", "remove", "--allow-principal", "User:alice", "--topic", "orders"}, asAdmin...)...); err == nil {
		t.Fatalf("acls remove without --force or a y on stdin succeeded: %s", out)
	}
	out := must("", append([]string{"acls", "remove", "--allow-principal", "User:alice", "--topic", "orders", "--force"}, asAdmin...)...)
	if !strings.Contains(out, "removed 2 ACLs") {
		t.Fatalf("acls remove: %s", out)
	}
	if list := must("", append([]string{"acls", "list"}, asAdmin...)...); strings.Contains(list, "User:alice") {
		t.Fatalf("acls list after remove:\n%s", list)
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after remove: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// alice is no admin: her acls add is refused by the broker.
	apw := filepath.Join(t.TempDir(), "alice.pw")
	_ = os.WriteFile(apw, []byte("alice-secret\n"), 0o600)
	if out, err := run("", "acls", "add", "--bootstrap", b.Addr().String(), "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "alice", "--sasl-password-file", apw, "--allow-principal", "User:alice", "--operation", "All", "--topic", "*"); err == nil || !strings.Contains(err.Error(), "CLUSTER_AUTHORIZATION_FAILED") {
		t.Fatalf("alice acls add: %v, want CLUSTER_AUTHORIZATION_FAILED\n%s", err, out)
	}
}
