package kdc_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/kdc"
)

// TestKDCIssuesTickets: a principal's keytab gets a TGT from the real KDC
// with MIT's kinit, and its ticket ends within the principal's max life.
func TestKDCIssuesTickets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a KDC")
	}
	k := kdc.Start(t, kdc.Options{})
	kt := k.AddPrincipal(t, "alice", kdc.Principal{MaxLife: time.Minute})
	cc := filepath.Join(t.TempDir(), "ccache")
	kinit := exec.Command("kinit", "-kt", kt, "-c", cc, k.Principal("alice"))
	kinit.Env = append(k.Env(), "KRB5CCNAME=FILE:"+cc)
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v\n%s\nKDC log:\n%s", err, out, k.Log())
	}
	klist := exec.Command("klist", "-c", cc)
	klist.Env = k.Env()
	out, err := klist.CombinedOutput()
	t.Logf("%s", out)
	if err != nil || !strings.Contains(string(out), "krbtgt/"+k.Realm+"@"+k.Realm) {
		t.Fatalf("klist: %v\n%s", err, out)
	}
	// An unknown principal is refused by the KDC.
	kinit = exec.Command("kinit", "-kt", kt, "-c", cc, k.Principal("mallory"))
	kinit.Env = k.Env()
	if out, err := kinit.CombinedOutput(); err == nil {
		t.Fatalf("kinit of an unknown principal succeeded:\n%s", out)
	}
}
