package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/broker"
	"github.com/sluicehq/sluice/broker/config"
)

// TestUsersOfflineFirstAdmin: `sluice users set --data-dir` creates the
// first user in a stopped broker's data directory; the broker then
// authenticates it over SASL_PLAINTEXT (and refuses a wrong password), and
// `users list` shows the mechanism but never a secret.
func TestUsersOfflineFirstAdmin(t *testing.T) {
	dir := t.TempDir()
	run := func(stdin string, args ...string) string {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
	out := run("admin-secret\n", "users", "set", "admin", "--mechanism", "SCRAM-SHA-512", "--password-stdin", "--data-dir", dir)
	if strings.Contains(out, "admin-secret") {
		t.Fatalf("the password was printed: %q", out)
	}
	if list := run("", "users", "list", "--data-dir", dir); !strings.Contains(list, "admin\tSCRAM-SHA-512(iterations=8192)") || strings.Contains(list, "salt") {
		t.Fatalf("users list: %q", list)
	}
	cfg, err := config.FromProperties(map[string]string{"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
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
	ping := func(password string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.SASL(scram.Auth{User: "admin", Pass: password}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer pcancel()
		return cl.Ping(pctx)
	}
	if err := ping("admin-secret"); err != nil {
		t.Fatalf("the first admin cannot authenticate: %v", err)
	}
	if err := ping("wrong"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	// The data directory is the running broker's: offline changes are refused.
	root := newRootCommand()
	root.SetIn(strings.NewReader("x\n"))
	root.SetArgs([]string{"users", "set", "bob", "--password-stdin", "--data-dir", dir})
	if err := root.Execute(); err == nil {
		t.Fatal("users set --data-dir on a running broker's directory succeeded")
	}
}
