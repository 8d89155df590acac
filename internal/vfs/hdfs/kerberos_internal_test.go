package hdfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSplitPrincipal(t *testing.T) {
	for _, c := range []struct{ in, name, realm, err string }{
		{"alice@EXAMPLE.COM", "alice", "EXAMPLE.COM", ""},
		{"loader/host.example.com@EXAMPLE.COM", "loader/host.example.com", "EXAMPLE.COM", ""},
		{"alice", "alice", "DEFAULT.REALM", ""},
		{"@EXAMPLE.COM", "", "", "is not name[/instance][@REALM]"},
		{"/x@R", "", "", "is not name[/instance][@REALM]"},
		{"a b@R", "", "", "is not name[/instance][@REALM]"},
	} {
		name, realm, err := splitPrincipal(c.in, "DEFAULT.REALM")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrKerberos) {
				t.Errorf("%q: %v, want an ErrKerberos saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || realm != c.realm {
			t.Errorf("%q: %q %q %v", c.in, name, realm, err)
		}
	}
	if _, _, err := splitPrincipal("alice", ""); err == nil || !strings.Contains(err.Error(), "no default_realm") {
		t.Errorf("no realm anywhere: %v", err)
	}
}

// Login failures that need no KDC: each an ErrKerberos naming what is
// missing.
func TestLoginRefusals(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte("[libdefaults]\n\tdefault_realm = EXAMPLE.COM\n[realms]\n\tEXAMPLE.COM = {\n\t\tkdc = 127.0.0.1:1\n\t}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KRB5_CLIENT_KTNAME", "")
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(dir, "no-ccache"))
	t.Setenv("KRB5_CONFIG", filepath.Join(dir, "missing.conf"))
	if _, err := login(Kerberos{}); err == nil || !strings.Contains(err.Error(), "no krb5.conf") {
		t.Errorf("missing krb5.conf: %v", err)
	}
	t.Setenv("KRB5_CONFIG", conf)
	for _, c := range []struct {
		name string
		k    Kerberos
		env  string
		want string
	}{
		{"no credentials", Kerberos{}, "", "no ticket cache at " + filepath.Join(dir, "no-ccache")},
		{"principal alone", Kerberos{Principal: "alice"}, "", "principal alice given without a keytab"},
		{"missing keytab", Kerberos{Keytab: filepath.Join(dir, "none.keytab")}, "", "reading keytab " + filepath.Join(dir, "none.keytab")},
		{"KRB5_CLIENT_KTNAME", Kerberos{}, "FILE:" + filepath.Join(dir, "env.keytab"), "reading keytab " + filepath.Join(dir, "env.keytab")},
	} {
		t.Setenv("KRB5_CLIENT_KTNAME", c.env)
		_, err := login(c.k)
		if err == nil || !errors.Is(err, ErrKerberos) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an ErrKerberos saying %q", c.name, err, c.want)
		}
	}
}
