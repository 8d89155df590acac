package hdfs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/kdc"
)

// Secure is a Kerberized MiniDFSCluster and the KDC of its realm, started
// once per test binary by StartSecure (stopped by Stop).
type Secure struct {
	// Addr is the NameNode's "localhost:PORT" (the client's NameNode
	// principal hdfs/_HOST resolves to hdfs/localhost through it).
	Addr string
	// ConfDir is a HADOOP_CONF_DIR for clients: core-site.xml
	// (hadoop.security.authentication=kerberos, fs.defaultFS) and
	// hdfs-site.xml (dfs.namenode.kerberos.principal=hdfs/_HOST@REALM,
	// dfs.data.transfer.protection=authentication).
	ConfDir string
	// KDC is the realm's KDC; tests add their own principals to it.
	KDC *kdc.KDC
	// User and UserKeytab are a client principal (user@REALM) and its keytab.
	User, UserKeytab string
}

var (
	secMu      sync.Mutex // guards the fields below
	secStarted bool
	secure     *Secure
	secFailure error
	secCmd     *exec.Cmd
	secStdin   io.WriteCloser
	secDir     string
)

// StartSecure returns the binary's Kerberized MiniDFSCluster, starting it
// (and its KDC) on first use: hadoop.security.authentication=kerberos,
// hadoop.security.authorization=true, the NameNode and DataNode as
// hdfs/localhost@REALM from a keytab, the web endpoints as
// HTTP/localhost@REALM, block access tokens, and SASL on data transfer
// (dfs.data.transfer.protection=authentication; with
// ignore.secure.ports.for.testing the DataNode needs neither privileged
// ports nor HTTPS). It fails tb when the cluster cannot run.
func StartSecure(tb testing.TB) *Secure {
	tb.Helper()
	if testing.Short() {
		tb.Skip("harness/hdfs: Kerberized HDFS integration test skipped in -short mode (make unit)")
	}
	secMu.Lock()
	defer secMu.Unlock()
	if !secStarted {
		secStarted = true
		secure, secFailure = startSecure()
	}
	if secFailure != nil {
		tb.Fatalf("%v", secFailure)
	}
	return secure
}

func property(b *strings.Builder, name, value string) {
	fmt.Fprintf(b, "  <property><name>%s</name><value>%s</value></property>\n", name, value)
}

func writeConf(path string, props [][2]string) error {
	var b strings.Builder
	b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
	for _, p := range props {
		property(&b, p[0], p[1])
	}
	b.WriteString("</configuration>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func startSecure() (*Secure, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(root, "testdata", ".cache", "hdfs")
	cp, err := os.ReadFile(filepath.Join(cache, "classpath.txt"))
	if err != nil {
		return nil, fmt.Errorf("harness/hdfs: MiniDFSCluster class path missing: run `make deps` (target deps-hdfs) first: %v", err)
	}
	// The Java main runs from its source file (java's source-file mode),
	// not from the shared cache's compiled class: the cache is shared by
	// every checkout, and this checkout's MiniHDFS.java is the one that
	// knows -Dminihdfs.conf.
	src := filepath.Join(root, "testdata", "hdfs", "MiniHDFS.java")
	if _, err := os.Stat(src); err != nil {
		return nil, fmt.Errorf("harness/hdfs: %v", err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("harness/hdfs: java not found on PATH: run `make deps` (target deps-hdfs installs a JDK)")
	}
	k, err := kdc.New(kdc.Options{})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Secure, error) { k.Stop(); return nil, err }
	service := filepath.Join(k.Dir, "hdfs-service.keytab")
	for _, p := range []string{"hdfs/localhost", "HTTP/localhost"} {
		if _, err := k.Add(p, kdc.Principal{}); err != nil {
			return fail(err)
		}
		if err := k.Export(p, service); err != nil {
			return fail(err)
		}
	}
	userKT, err := k.Add("sluice", kdc.Principal{})
	if err != nil {
		return fail(err)
	}
	secDir, err = os.MkdirTemp("", "sluice-minihdfs-secure-")
	if err != nil {
		return fail(err)
	}
	hdfsP, httpP := k.Principal("hdfs/localhost"), k.Principal("HTTP/localhost")
	server := filepath.Join(secDir, "secure-site.xml")
	if err := writeConf(server, [][2]string{
		{"hadoop.security.authentication", "kerberos"},
		{"hadoop.security.authorization", "true"},
		{"hadoop.rpc.protection", "authentication"},
		{"dfs.namenode.kerberos.principal", hdfsP},
		{"dfs.namenode.keytab.file", service},
		{"dfs.datanode.kerberos.principal", hdfsP},
		{"dfs.datanode.keytab.file", service},
		{"dfs.web.authentication.kerberos.principal", httpP},
		{"dfs.web.authentication.kerberos.keytab", service},
		{"dfs.namenode.kerberos.internal.spnego.principal", httpP},
		{"dfs.block.access.token.enable", "true"},
		{"dfs.data.transfer.protection", "authentication"},
		{"dfs.http.policy", "HTTP_ONLY"},
		{"ignore.secure.ports.for.testing", "true"},
	}); err != nil {
		return fail(err)
	}
	logPath := filepath.Join(secDir, "minihdfs.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true",
		"-Djava.security.krb5.conf="+k.Krb5Conf,
		"-Dminihdfs.conf="+server,
		"-cp", strings.TrimSpace(string(cp)),
		src, filepath.Join(secDir, "data"))
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+k.Krb5Conf)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fail(err)
	}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("harness/hdfs: starting java: %w", err))
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "MINIHDFS READY hdfs://"); ok {
				ready <- rest
			}
			fmt.Fprintln(logFile, line)
		}
		close(ready)
	}()
	var a string
	select {
	case got, ok := <-ready:
		if !ok {
			cmd.Wait()
			return fail(fmt.Errorf("harness/hdfs: Kerberized MiniDFSCluster exited before it was ready; log %s:\n%s\nKDC log:\n%s", logPath, tail(logPath), k.Log()))
		}
		a = got
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		return fail(fmt.Errorf("harness/hdfs: Kerberized MiniDFSCluster not ready after 3 minutes; log %s:\n%s", logPath, tail(logPath)))
	}
	// A cluster that ignored the secure configuration would serve simple
	// auth: make sure the NameNode logged in from its keytab.
	if lg, _ := os.ReadFile(logPath); !strings.Contains(string(lg), "Login successful for user "+hdfsP) {
		cmd.Process.Kill()
		cmd.Wait()
		return fail(fmt.Errorf("harness/hdfs: the MiniDFSCluster started without a Kerberos login of %s (is testdata/hdfs/MiniHDFS.java's -Dminihdfs.conf there?); log %s:\n%s", hdfsP, logPath, tail(logPath)))
	}
	_, port, _ := strings.Cut(a, ":")
	s := &Secure{Addr: "localhost:" + port, ConfDir: filepath.Join(secDir, "conf"), KDC: k, User: k.Principal("sluice"), UserKeytab: userKT}
	if err := os.MkdirAll(s.ConfDir, 0o755); err != nil {
		return fail(err)
	}
	if err := writeConf(filepath.Join(s.ConfDir, "core-site.xml"), [][2]string{
		{"fs.defaultFS", "hdfs://" + s.Addr},
		{"hadoop.security.authentication", "kerberos"},
		{"hadoop.rpc.protection", "authentication"},
	}); err != nil {
		return fail(err)
	}
	if err := writeConf(filepath.Join(s.ConfDir, "hdfs-site.xml"), [][2]string{
		{"dfs.namenode.kerberos.principal", "hdfs/_HOST@" + k.Realm},
		{"dfs.data.transfer.protection", "authentication"},
	}); err != nil {
		return fail(err)
	}
	secCmd, secStdin = cmd, stdin
	return s, nil
}

// Log returns the end of the secure cluster's log (for failure messages).
func (s *Secure) Log() string { return tail(filepath.Join(secDir, "minihdfs.log")) }

func stopSecure() {
	secMu.Lock()
	defer secMu.Unlock()
	if secCmd == nil {
		return
	}
	secStdin.Close()
	done := make(chan struct{})
	go func() { secCmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		secCmd.Process.Kill()
		<-done
	}
	secCmd = nil
	secure.KDC.Stop()
	os.RemoveAll(secDir)
}
