package hdfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// dropper dials the NameNode and can drop every connection it dialed
// (a network cut, a NameNode restart): fault injection around the real
// connection.
type dropper struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *dropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *dropper) drop() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.conns)
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
	return n
}

// A keytab session outlives its tickets: with a KDC max ticket life of 60 s
// for its principal, a file system opened from a keytab writes a file,
// waits until both its TGT and its NameNode service ticket have expired,
// loses its NameNode connection (dropped under it, as by a NameNode
// restart or a network cut), and writes and reads another file on a new
// connection, which needs a new service ticket: the keytab login got a new
// TGT before the old one expired. A session of the same principal from its
// ticket cache (kinit, no keytab: nothing to log in again with) cannot: its
// new connection is refused with the Kerberos error, which shows the test
// depends on the renewal.
func TestKerberosKeytabSessionOutlivesTicket(t *testing.T) {
	s := secureEnv(t)
	const life = 60 * time.Second
	kt := s.KDC.AddPrincipal(t, "shortlived", kdc.Principal{MaxLife: life})
	princ := s.KDC.Principal("shortlived")
	cc := filepath.Join(t.TempDir(), "ccache")
	kinit := exec.Command("kinit", "-kt", kt, "-c", cc, princ)
	kinit.Env = s.KDC.Env()
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit: %v\n%s", err, out)
	}
	start := time.Now()
	var kd, cd dropper
	keytabFS, err := vfshdfs.New(s.Addr, vfshdfs.Options{Kerberos: vfshdfs.Kerberos{Principal: princ, Keytab: kt}, DialNamenode: kd.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer keytabFS.Close()
	t.Setenv("KRB5CCNAME", "FILE:"+cc)
	cacheFS, err := vfshdfs.New(s.Addr, vfshdfs.Options{DialNamenode: cd.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer cacheFS.Close()
	roundTrip(t, keytabFS)
	roundTrip(t, cacheFS)

	time.Sleep(time.Until(start.Add(life + 10*time.Second)))
	if kd.drop() == 0 || cd.drop() == 0 {
		t.Fatal("no NameNode connection to drop")
	}
	if _, err := keytabFS.Stat("/krb"); err != nil {
		t.Fatalf("keytab session after %v (ticket life %v): %v", time.Since(start).Round(time.Second), life, err)
	}
	roundTrip(t, keytabFS)
	t.Logf("keytab session: a new NameNode connection %v after login (ticket life %v)", time.Since(start).Round(time.Second), life)

	_, err = cacheFS.Stat("/krb")
	if err == nil {
		t.Fatalf("the ticket cache session reconnected %v after login with a %v ticket life: the test does not reach the NameNode with a new ticket", time.Since(start).Round(time.Second), life)
	}
	t.Logf("ticket cache session refused as expected: %v", err)
}
