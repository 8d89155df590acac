package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRegistryCommandBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"registry", "--bootstrap", "nohost"},
		{"registry", "--log-level", "loud"},
		{"registry", "--listen", "127.0.0.1:99999", "--bootstrap", "127.0.0.1:1", "--start-timeout", "1s"},
		{"registry", "--listen", "127.0.0.1:0", "--bootstrap", "127.0.0.1:1", "--start-timeout", "1s"},
		{"broker", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--registry-listen", "127.0.0.1:99999"},
	} {
		root := newRootCommand()
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		if err := root.Execute(); err == nil {
			t.Errorf("%v: no error", args)
		} else {
			t.Logf("%v: %v", args, err)
		}
	}
}

// runCommand runs a sluice command in-process and waits for a line of its
// output matching re; it returns the first group and the command's result.
func runCommand(t *testing.T, re *regexp.Regexp, args ...string) (string, chan error) {
	t.Helper()
	root := newRootCommand()
	var out syncBuffer
	root.SetOut(&out)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[1], done
		}
		select {
		case err := <-done:
			t.Fatalf("%v exited early: %v\n%s", args, err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: no line matching %s in %q", args, re, out.String())
		}
	}
}

// curl runs curl, as the README shows it, and returns what it printed.
func curl(t *testing.T, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl not found on PATH: install curl (Debian: apt-get install curl)")
	}
	out, err := exec.Command(path, append([]string{"-sS"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestBrokerWithRegistryAndStandaloneRegistry runs `sluice broker
// --registry-listen`, registers a schema with curl as the README does, then
// `sluice registry` against the same broker serves the same id; SIGTERM
// stops both cleanly.
func TestBrokerWithRegistryAndStandaloneRegistry(t *testing.T) {
	registryLine := regexp.MustCompile(`schema registry listening on (http://\S+)`)
	root := newRootCommand()
	var out syncBuffer
	root.SetOut(&out)
	root.SetArgs([]string{"broker", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--registry-listen", "127.0.0.1:0", "--log-level", "warn"})
	brokerDone := make(chan error, 1)
	go func() { brokerDone <- root.Execute() }()
	deadline := time.Now().Add(30 * time.Second)
	var brokerAddr, embedded string
	for brokerAddr == "" || embedded == "" {
		if m := regexp.MustCompile(`sluice broker listening on (\S+)`).FindStringSubmatch(out.String()); m != nil {
			brokerAddr = m[1]
		}
		if m := registryLine.FindStringSubmatch(out.String()); m != nil {
			embedded = m[1]
		}
		select {
		case err := <-brokerDone:
			t.Fatalf("broker exited early: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening lines: %q", out.String())
		}
	}

	got := curl(t, "-X", "POST", "-H", "Content-Type: application/vnd.schemaregistry.v1+json",
		"--data", `{"schema": "{\"type\":\"record\",\"name\":\"PageView\",\"fields\":[{\"name\":\"url\",\"type\":\"string\"},{\"name\":\"ts\",\"type\":\"long\"}]}"}`,
		embedded+"/subjects/pageviews-value/versions")
	if got != `{"id":1}` {
		t.Fatalf("register with curl: %s", got)
	}

	standalone, registryDone := runCommand(t, registryLine, "registry", "--listen", "127.0.0.1:0", "--bootstrap", brokerAddr, "--log-level", "warn")
	schema := curl(t, standalone+"/schemas/ids/1")
	if !strings.Contains(schema, `PageView`) {
		t.Fatalf("the standalone registry's id 1: %s", schema)
	}
	if s := curl(t, standalone+"/subjects"); s != `["pageviews-value"]` {
		t.Fatalf("the standalone registry's subjects: %s", s)
	}
	if m := curl(t, embedded+"/metrics"); !strings.Contains(m, "sluice_registry_requests_total") {
		t.Fatalf("metrics: %.300s", m)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for name, done := range map[string]chan error{"broker": brokerDone, "registry": registryDone} {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s exit: %v", name, err)
			}
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not stop on SIGTERM", name)
		}
	}
}
