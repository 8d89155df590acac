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
	// Issue 17's spec mistakes: each refused by `load run` in one line naming the key.
	spec := func(name, body string) string {
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte("name: j\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passwd := spec("passwd", "source: {topics: [t]}\ndecode: {format: avro, schema_file: /etc/passwd}\noutput: {uri: /tmp/x}\n")
	never := spec("never", "source: {topics: [t]}\ndecode: {format: string}\noutput: {uri: /tmp/x}\nschedule: \"0 0 30 2 *\"\n")
	rootURI := spec("root", "source: {topics: [t]}\ndecode: {format: string}\noutput: {uri: \"file:///\"}\n")
	half := spec("half", "source: {topics: [t]}\ndecode: {format: string}\noutput: {uri: /tmp/x, max_file_records: 1.5}\n")
	port := spec("port", "source: {topics: [t], bootstrap: \"h:99999999999\"}\ndecode: {format: string}\noutput: {uri: /tmp/x}\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"load", "run", passwd}, "decode.schema_file: /etc/passwd: line 1: not JSON"},
		{[]string{"load", "run", never}, `schedule: "0 0 30 2 *" never fires (February 30 does not exist)`},
		{[]string{"load", "plan", rootURI}, `output.uri: "file:///" is the root`},
		{[]string{"load", "run", half}, `output.max_file_records: "1.5" is not a whole number`},
		{[]string{"load", "run", port}, `source.bootstrap[0]: "h:99999999999": the port must be 1 to 65535`},
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
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "root:x:") {
			t.Errorf("sluice %s: got %v, want one line naming %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
