package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/kdc"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// krbEnv is the environment of a sluice process reaching the Kerberized
// cluster: its HADOOP_CONF_DIR and krb5.conf, and no ticket cache (so only
// the spec's keytab can log in).
func krbEnv(t *testing.T, s *hdfs.Secure, confDir string) []string {
	return append(os.Environ(), "HADOOP_CONF_DIR="+confDir, "KRB5_CONFIG="+s.KDC.Krb5Conf,
		"KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "none"), "KRB5_CLIENT_KTNAME=")
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestLoadRunToKerberizedHDFS: `sluice load run` (the built binary) loads
// a topic into a Kerberized MiniDFSCluster (Kerberos authentication and
// authorization, block tokens, SASL on data transfer) with the spec's
// output.kerberos keytab, exactly once: the files read back through a
// Kerberos login, every (_partition, _offset) once per partition and
// DuckDB's rows per hour as produced; a second run loads nothing new. A
// stale keytab, an unknown principal, and a simple-auth client (no Kerberos
// in HADOOP_CONF_DIR, no output.kerberos) are each refused with an error
// saying so, and write nothing.
func TestLoadRunToKerberizedHDFS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := hdfs.StartSecure(t)
	b := kafka.StartSluice(t)
	bin := kafka.SluiceBinary(t)
	recs, hours := pageViews(t, "krb-pv", 3000, 3, 3*time.Hour, -1)
	counts := produceAll(t, ctx, b.Addr, "krb-pv", 3, recs)

	dir := t.TempDir()
	copyFile(t, s.UserKeytab, filepath.Join(dir, "loader.keytab"))
	stale := s.KDC.AddPrincipal(t, "stale-loader", kdc.Principal{})
	if _, err := s.KDC.Query("cpw -randkey stale-loader"); err != nil {
		t.Fatal(err)
	}
	ghost := s.KDC.AddPrincipal(t, "ghost-loader", kdc.Principal{})
	if _, err := s.KDC.Query("delprinc -force ghost-loader"); err != nil {
		t.Fatal(err)
	}
	stamp := time.Now().UnixNano()
	uri := func(name string) string { return fmt.Sprintf("hdfs://%s/warehouse/krb-%d-%s", s.Addr, stamp, name) }
	spec := func(name, kerberos string) string {
		text := fmt.Sprintf(pageViewJob, "pv-krb-"+name, b.Addr, "krb-pv", 1000, "schema_file: pageview.avsc", uri(name))
		if kerberos != "" {
			text = strings.Replace(text, "  metadata_columns: true\n", "  metadata_columns: true\n  kerberos: "+kerberos+"\n", 1)
		}
		p := filepath.Join(dir, name+".yaml")
		writeJobFile(t, dir, text)
		if err := os.Rename(filepath.Join(dir, "job.yaml"), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	env := krbEnv(t, s, s.ConfDir)
	good := spec("good", fmt.Sprintf("{principal: %s, keytab: loader.keytab}", s.User))
	if out, err := run(env, "load", "run", "--quiet", good); err != nil {
		t.Fatalf("sluice load run: %v\n%s\ncluster log:\n%s", err, out, s.Log())
	}
	// A second run finds nothing new (checked below: still exactly once).
	if out, err := run(env, "load", "run", "--quiet", good); err != nil {
		t.Fatalf("second sluice load run: %v\n%s", err, out)
	}

	// Read back through a Kerberos login of our own.
	t.Setenv("HADOOP_CONF_DIR", s.ConfDir)
	t.Setenv("KRB5_CONFIG", s.KDC.Krb5Conf)
	sp, err := jobs.LoadSpec(good)
	if err != nil {
		t.Fatal(err)
	}
	out, err := filesystem.OpenWith(uri("good"), sp.HDFSOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	local := filepath.Join(dir, "copy")
	copyOut(t, out, "", local)
	copyCommits(t, out, local, "krb-pv", counts)
	checkExactlyOnce(t, local, "krb-pv", counts, true)
	if got := hourCounts(t, duck(t), dataGlob(local, "parquet")); !maps.Equal(got, hours) {
		t.Fatalf("rows per hour %v, produced %v", got, hours)
	}

	whole, err := filesystem.OpenWith(fmt.Sprintf("hdfs://%s/warehouse", s.Addr), sp.HDFSOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	copyFile(t, stale, filepath.Join(dir, "stale.keytab"))
	copyFile(t, ghost, filepath.Join(dir, "ghost.keytab"))
	empty := t.TempDir()
	for _, c := range []struct {
		name, kerberos, confDir, want string
	}{
		{"stale", fmt.Sprintf("{principal: %s, keytab: stale.keytab}", s.KDC.Principal("stale-loader")), s.ConfDir, "keytab incorrect"},
		{"ghost", fmt.Sprintf("{principal: %s, keytab: ghost.keytab}", s.KDC.Principal("ghost-loader")), s.ConfDir, "KDC_ERR_C_PRINCIPAL_UNKNOWN"},
		{"simple", "", empty, "the cluster requires Kerberos"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := spec(c.name, c.kerberos)
			msg, err := run(krbEnv(t, s, c.confDir), "load", "run", "--quiet", p)
			if err == nil {
				t.Fatalf("sluice load run succeeded:\n%s", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("sluice load run failed without saying %q:\n%s", c.want, msg)
			}
			t.Logf("refused: %s", strings.TrimSpace(msg))
			if _, err := whole.Stat(fmt.Sprintf("krb-%d-%s", stamp, c.name)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the refused load left its output directory: %v", err)
			}
		})
	}
}
