package hdfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	vfshdfs "github.com/sluicehq/sluice/internal/vfs/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/kdc"
)

// secureEnv points the Hadoop and Kerberos configuration at the binary's
// Kerberized MiniDFSCluster and its KDC.
func secureEnv(t *testing.T) *hdfs.Secure {
	s := hdfs.StartSecure(t)
	t.Setenv("HADOOP_CONF_DIR", s.ConfDir)
	t.Setenv("KRB5_CONFIG", s.KDC.Krb5Conf)
	t.Setenv("KRB5_CLIENT_KTNAME", "")
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "no-ccache"))
	return s
}

func roundTrip(t *testing.T, h *vfshdfs.FS) {
	t.Helper()
	name := fmt.Sprintf("/krb/%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), seq.Add(1))
	if err := h.MkdirAll("/krb"); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("kerberized "), 200_000) // 2.2 MB: three blocks through SASL
	if err := h.WriteExclusive(name, data); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	f, err := h.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (want %d): %v", len(got), len(data), err)
	}
}

// A keytab login (output.kerberos: principal + keytab) writes and reads a
// file on the Kerberized cluster, the NameNode principal coming from
// HADOOP_CONF_DIR's hdfs/_HOST@REALM and SASL on every DataNode connection
// (dfs.data.transfer.protection=authentication).
func TestKerberosKeytab(t *testing.T) {
	s := secureEnv(t)
	h, err := vfshdfs.New(s.Addr, vfshdfs.Options{Kerberos: vfshdfs.Kerberos{Principal: s.User, Keytab: s.UserKeytab}})
	if err != nil {
		t.Fatalf("%v\ncluster log:\n%s", err, s.Log())
	}
	defer h.Close()
	if got := h.KerberosPrincipal(); got != s.User {
		t.Fatalf("logged in as %q, want %q", got, s.User)
	}
	roundTrip(t, h)
	// The keytab from KRB5_CLIENT_KTNAME and its first principal.
	t.Setenv("KRB5_CLIENT_KTNAME", "FILE:"+s.UserKeytab)
	h2, err := vfshdfs.New("", vfshdfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if got := h2.KerberosPrincipal(); got != s.User {
		t.Fatalf("KRB5_CLIENT_KTNAME: logged in as %q, want %q", got, s.User)
	}
	roundTrip(t, h2)
}

// The ticket cache of MIT's kinit (KRB5CCNAME) logs in when no keytab is
// given.
func TestKerberosTicketCache(t *testing.T) {
	s := secureEnv(t)
	cc := filepath.Join(t.TempDir(), "ccache")
	kinit := exec.Command("kinit", "-kt", s.UserKeytab, "-c", cc, s.User)
	kinit.Env = s.KDC.Env()
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v\n%s", err, out)
	}
	t.Setenv("KRB5CCNAME", "FILE:"+cc)
	h, err := vfshdfs.New(s.Addr, vfshdfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := h.KerberosPrincipal(); got != s.User {
		t.Fatalf("logged in as %q, want %q", got, s.User)
	}
	roundTrip(t, h)
}

// A stale keytab (the principal's key changed since), a principal the KDC
// does not know, a principal the keytab does not hold, no credentials at
// all: each refused at New with an error naming what failed, before any
// write.
func TestKerberosRefused(t *testing.T) {
	s := secureEnv(t)
	stale := s.KDC.AddPrincipal(t, "stale", kdcPrincipal())
	if _, err := s.KDC.Query("cpw -randkey stale"); err != nil {
		t.Fatal(err)
	}
	ghost := s.KDC.AddPrincipal(t, "ghost", kdcPrincipal())
	if _, err := s.KDC.Query("delprinc -force ghost"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		k    vfshdfs.Kerberos
		want string
	}{
		{"stale keytab", vfshdfs.Kerberos{Principal: s.KDC.Principal("stale"), Keytab: stale}, "keytab incorrect"},
		{"unknown principal", vfshdfs.Kerberos{Principal: s.KDC.Principal("ghost"), Keytab: ghost}, "KDC_ERR_C_PRINCIPAL_UNKNOWN"},
		{"principal not in keytab", vfshdfs.Kerberos{Principal: s.KDC.Principal("nobody"), Keytab: s.UserKeytab}, "nobody"},
		{"no credentials", vfshdfs.Kerberos{}, "no ticket cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := vfshdfs.New(s.Addr, vfshdfs.Options{Kerberos: c.k})
			if err == nil {
				h.Close()
				t.Fatal("login succeeded")
			}
			if !errors.Is(err, vfshdfs.ErrKerberos) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want ErrKerberos mentioning %q", err, c.want)
			}
			t.Log(err)
		})
	}
}

// A client with simple authentication (no Kerberos in its Hadoop
// configuration) is refused by the secure NameNode, and says why.
func TestKerberosSimpleClientRefused(t *testing.T) {
	s := secureEnv(t)
	t.Setenv("HADOOP_CONF_DIR", t.TempDir()) // no core-site: simple auth
	h, err := vfshdfs.New(s.Addr, vfshdfs.Options{User: "sluice"})
	if err == nil {
		h.Close()
		t.Fatal("a simple-auth client reached the Kerberized NameNode")
	}
	if !strings.Contains(err.Error(), "the cluster requires Kerberos") {
		t.Fatalf("error %q does not say simple authentication is refused", err)
	}
	t.Log(err)
}

func kdcPrincipal() kdc.Principal { return kdc.Principal{} }
