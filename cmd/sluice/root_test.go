package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("version: %v", err)
	}
	if !strings.HasPrefix(out.String(), "sluice ") {
		t.Fatalf("version printed %q, want it to start with %q", out.String(), "sluice ")
	}
}

func TestUnknownCommandFails(t *testing.T) {
	root := newRootCommand()
	root.SetArgs([]string{"no-such-command"})
	if err := root.Execute(); err == nil {
		t.Fatal("an unknown command must fail")
	}
}
