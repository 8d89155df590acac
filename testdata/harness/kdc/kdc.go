// Package kdc runs a real MIT Kerberos KDC (krb5kdc from Debian's krb5-kdc)
// for tests, on a free loopback port, in a temp directory of its own: its own
// krb5.conf and kdc.conf, a database made with `kdb5_util create -s`, and
// principals added with `kadmin.local addprinc -randkey` and exported with
// `ktadd` into keytab files.
//
//	k := kdc.Start(tb, kdc.Options{})
//	keytab := k.AddPrincipal(tb, "hdfs/localhost", kdc.Principal{})
//	os.Setenv("KRB5_CONFIG", k.Krb5Conf)
//
// `make deps` (target deps-kerberos in testdata/mk/kerberos.mk) installs the
// programs; when one is missing, Start fails the test naming that target.
// The KDC is stopped (and its directory removed) by the test's cleanup.
package kdc

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DefaultRealm is the realm of a KDC started with a zero Options.Realm.
const DefaultRealm = "SLUICE.TEST"

// Options tune Start.
type Options struct {
	// Realm (default DefaultRealm).
	Realm string
	// MaxLife is the realm's longest ticket life (default 10h); a
	// principal's own Principal.MaxLife may shorten its tickets further.
	MaxLife time.Duration
}

// Principal tunes AddPrincipal.
type Principal struct {
	// MaxLife is the principal's longest ticket life (0: the realm's). Its
	// TGT, and so every service ticket it gets, ends that soon after a
	// login: the renewal tests use a minute.
	MaxLife time.Duration
}

// KDC is a running krb5kdc.
type KDC struct {
	Realm string
	// Addr is the KDC's "127.0.0.1:PORT" (TCP and UDP).
	Addr string
	// Dir is the KDC's own directory (its database, configs, keytabs).
	Dir string
	// Krb5Conf is the krb5.conf naming this KDC: KRB5_CONFIG for MIT tools
	// and gokrb5, -Djava.security.krb5.conf for a JVM.
	Krb5Conf string

	kdcConf string
	cmd     *exec.Cmd
	logPath string
}

var tools = []string{"krb5kdc", "kdb5_util", "kadmin.local"}

// LookTools finds the MIT Kerberos programs; the error names what is
// missing and the make target that installs it.
func LookTools() error {
	for _, t := range tools {
		if _, err := lookPath(t); err != nil {
			return fmt.Errorf("harness/kdc: %s not found (PATH and /usr/sbin): run `make deps` (target deps-kerberos installs krb5-kdc, krb5-admin-server, krb5-user)", t)
		}
	}
	return nil
}

// lookPath also looks in the sbin directories, which a non-root PATH may
// lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// Start starts a KDC for tb; it is stopped when tb's test ends. It fails tb
// when the KDC cannot run.
func Start(tb testing.TB, opts Options) *KDC {
	tb.Helper()
	k, err := New(opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(k.Stop)
	return k
}

// New starts a KDC; Stop it when done.
func New(opts Options) (*KDC, error) {
	if err := LookTools(); err != nil {
		return nil, err
	}
	if opts.Realm == "" {
		opts.Realm = DefaultRealm
	}
	if opts.MaxLife <= 0 {
		opts.MaxLife = 10 * time.Hour
	}
	dir, err := os.MkdirTemp("", "sluice-kdc-")
	if err != nil {
		return nil, err
	}
	k := &KDC{Realm: opts.Realm, Dir: dir, Krb5Conf: filepath.Join(dir, "krb5.conf"), kdcConf: filepath.Join(dir, "kdc.conf"), logPath: filepath.Join(dir, "krb5kdc.log")}
	// A port free for both TCP and UDP (krb5kdc listens on both).
	var port int
	for range 20 {
		port, err = freePort()
		if err == nil {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("harness/kdc: no free loopback port: %w", err)
	}
	k.Addr = "127.0.0.1:" + strconv.Itoa(port)
	if err := k.writeConfigs(port, opts); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if out, err := k.run("kdb5_util", "-r", k.Realm, "create", "-s", "-P", "sluice-test-master-key"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("harness/kdc: kdb5_util create: %v\n%s", err, out)
	}
	if err := k.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return k, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	u, err := net.ListenPacket("udp", l.Addr().String())
	l.Close()
	if err != nil {
		return 0, err
	}
	u.Close()
	return port, nil
}

func (k *KDC) writeConfigs(port int, opts Options) error {
	enc := "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"
	krb5 := fmt.Sprintf(`[libdefaults]
	default_realm = %[1]s
	dns_lookup_realm = false
	dns_lookup_kdc = false
	dns_canonicalize_hostname = false
	rdns = false
	udp_preference_limit = 1
	forwardable = true
	ticket_lifetime = %[3]ds
	default_tkt_enctypes = %[4]s
	default_tgs_enctypes = %[4]s
	permitted_enctypes = %[4]s

[realms]
	%[1]s = {
		kdc = 127.0.0.1:%[2]d
		admin_server = 127.0.0.1:%[2]d
	}

[domain_realm]
	localhost = %[1]s
	.localhost = %[1]s
`, k.Realm, port, int(opts.MaxLife.Seconds()), enc)
	kdc := fmt.Sprintf(`[kdcdefaults]
	kdc_ports = %[2]d
	kdc_tcp_ports = %[2]d
	kdc_listen = 127.0.0.1:%[2]d
	kdc_tcp_listen = 127.0.0.1:%[2]d

[realms]
	%[1]s = {
		database_name = %[3]s/principal
		key_stash_file = %[3]s/stash
		acl_file = %[3]s/kadm5.acl
		kdc_ports = %[2]d
		kdc_tcp_ports = %[2]d
		kdc_listen = 127.0.0.1:%[2]d
		kdc_tcp_listen = 127.0.0.1:%[2]d
		max_life = %[4]ds
		max_renewable_life = 0
		supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
	}

[logging]
	kdc = FILE:%[5]s
	admin_server = FILE:%[3]s/kadmin.log
	default = FILE:%[3]s/krb5lib.log
`, k.Realm, port, k.Dir, int(opts.MaxLife.Seconds()), k.logPath)
	if err := os.WriteFile(k.Krb5Conf, []byte(krb5), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(k.Dir, "kadm5.acl"), nil, 0o644); err != nil {
		return err
	}
	return os.WriteFile(k.kdcConf, []byte(kdc), 0o644)
}

// Env is the environment of an MIT Kerberos program using this KDC.
func (k *KDC) Env() []string {
	return append(os.Environ(), "KRB5_CONFIG="+k.Krb5Conf, "KRB5_KDC_PROFILE="+k.kdcConf)
}

func (k *KDC) run(name string, args ...string) ([]byte, error) {
	p, err := lookPath(name)
	if err != nil {
		return nil, err
	}
	c := exec.Command(p, args...)
	c.Env = k.Env()
	c.Dir = k.Dir
	return c.CombinedOutput()
}

func (k *KDC) start() error {
	p, err := lookPath("krb5kdc")
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(k.Dir, "krb5kdc.out"))
	if err != nil {
		return err
	}
	defer logf.Close()
	k.cmd = exec.Command(p, "-n", "-r", k.Realm, "-P", filepath.Join(k.Dir, "krb5kdc.pid"))
	k.cmd.Env = k.Env()
	k.cmd.Dir = k.Dir
	k.cmd.Stdout, k.cmd.Stderr = logf, logf
	dieWithParent(k.cmd)
	if err := k.cmd.Start(); err != nil {
		return fmt.Errorf("harness/kdc: starting krb5kdc: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- k.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", k.Addr, time.Second); err == nil {
			c.Close()
			// Keep reaping in the background; Stop kills and waits on its own.
			go func() { <-exited }()
			return nil
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(filepath.Join(k.Dir, "krb5kdc.out"))
			lg, _ := os.ReadFile(k.logPath)
			return fmt.Errorf("harness/kdc: krb5kdc exited (%v) before listening on %s:\n%s%s", err, k.Addr, out, lg)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			k.cmd.Process.Kill()
			return fmt.Errorf("harness/kdc: krb5kdc not listening on %s after 20s", k.Addr)
		}
	}
}

// AddPrincipal adds name (in the realm) with a random key and exports it
// to a keytab file of its own, whose path it returns. It fails tb on error.
func (k *KDC) AddPrincipal(tb testing.TB, name string, p Principal) string {
	tb.Helper()
	kt, err := k.Add(name, p)
	if err != nil {
		tb.Fatal(err)
	}
	return kt
}

// Add is AddPrincipal returning its error.
func (k *KDC) Add(name string, p Principal) (string, error) {
	q := "addprinc -randkey"
	if p.MaxLife > 0 {
		q += fmt.Sprintf(` -maxlife "%d seconds"`, int(p.MaxLife.Seconds()))
	}
	q += " " + name
	if out, err := k.run("kadmin.local", "-r", k.Realm, "-q", q); err != nil || bytes.Contains(out, []byte("add_principal: ")) {
		return "", fmt.Errorf("harness/kdc: kadmin.local %s: %v\n%s", q, err, out)
	}
	kt := filepath.Join(k.Dir, strings.NewReplacer("/", "_", "@", "_").Replace(name)+".keytab")
	if err := k.Export(name, kt); err != nil {
		return "", err
	}
	return kt, nil
}

// Export writes name's keys (another copy, same version) into keytab.
// Several principals exported to one file make one keytab holding them all.
func (k *KDC) Export(name, keytab string) error {
	q := "ktadd -norandkey -k " + keytab + " " + name
	if out, err := k.run("kadmin.local", "-r", k.Realm, "-q", q); err != nil || !bytes.Contains(out, []byte("added to keytab")) {
		return fmt.Errorf("harness/kdc: kadmin.local %s: %v\n%s", q, err, out)
	}
	return nil
}

// Principal returns name@REALM.
func (k *KDC) Principal(name string) string { return name + "@" + k.Realm }

// Log returns the end of the KDC's log (for failure messages).
func (k *KDC) Log() string {
	b, _ := os.ReadFile(k.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop kills the KDC and removes its directory.
func (k *KDC) Stop() {
	if k.cmd != nil && k.cmd.Process != nil {
		k.cmd.Process.Kill()
		k.cmd = nil
	}
	os.RemoveAll(k.Dir)
}

// Query runs one kadmin.local query (e.g. "delprinc -force NAME",
// "cpw -randkey NAME") and returns its output.
func (k *KDC) Query(q string) (string, error) {
	out, err := k.run("kadmin.local", "-r", k.Realm, "-q", q)
	if err != nil {
		return string(out), fmt.Errorf("harness/kdc: kadmin.local %s: %v\n%s", q, err, out)
	}
	return string(out), nil
}
