package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The loader's commands refuse bad input with a one-line reason naming
// what is wrong.
func TestLoadCommandsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: j\nsource: {topics: [t]}\ndecode: {format: avro, schema_file: x.avsc}\nmap: {where: \"a >\"}\noutput: {uri: /tmp/x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(dir, "unknown.yaml")
	if err := os.WriteFile(unknown, []byte("name: j\nsource: {topics: [t]}\ndecode: {format: string}\noutput: {uri: /tmp/x, fromat: avro}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"load", "run", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"load", "plan", unknown}, "output.fromat: unknown key"},
		{[]string{"load", "run", bad}, "decode.schema_file"},
		{[]string{"load", "run"}, "accepts 1 arg"},
		{[]string{"checkpoints", "list", unknown}, "output.fromat"},
		{[]string{"checkpoints", "show", "t/0@5"}, "name the job"},
		{[]string{"replay", unknown}, "--from-checkpoint ID is required"},
	} {
		root := newRootCommand()
		root.SetArgs(c.args)
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("sluice %s: got %v, want one line naming %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
