package scheduler_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
	vfshdfs "github.com/sluicehq/sluice/internal/vfs/hdfs"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// TestLoaderJobOpensKerberizedOutput: a loader job's output.kerberos is
// what the scheduler (and `sluice runs`) open its output with
// (Job.OpenOutput): with no credentials in the environment, the job's
// keytab reaches the Kerberized MiniDFSCluster, writes and reads there,
// while the bare URI (filesystem.Open) is refused for want of credentials.
func TestLoaderJobOpensKerberizedOutput(t *testing.T) {
	s := hdfs.StartSecure(t)
	t.Setenv("HADOOP_CONF_DIR", s.ConfDir)
	t.Setenv("KRB5_CONFIG", s.KDC.Krb5Conf)
	t.Setenv("KRB5_CLIENT_KTNAME", "")
	t.Setenv("KRB5CCNAME", "FILE:"+filepath.Join(t.TempDir(), "none"))
	dir := t.TempDir()
	b, err := os.ReadFile(s.UserKeytab)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loader.keytab"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`name: krb-job
source:
  bootstrap: [127.0.0.1:1]
  topics: [t]
decode:
  format: json
output:
  uri: hdfs://%s/warehouse/krb-job
  format: jsonl
  kerberos: {principal: %s, keytab: loader.keytab}
schedule: "@every 1m"
`, s.Addr, s.User)
	path := filepath.Join(dir, "job.yaml")
	job, err := (&scheduler.LoaderEngine{}).ParseJob(path, []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	if job.OpenOutput == nil {
		t.Fatal("a loader job has no OpenOutput")
	}
	fs, err := job.OpenOutput()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if err := fs.MkdirAll("_sluice"); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("_sluice/probe-%d", os.Getpid())
	if err := fs.WriteExclusive(name, []byte("kerberized")); err != nil {
		t.Fatal(err)
	}
	got, err := vfs.ReadFile(fs, name)
	if err != nil || string(got) != "kerberized" {
		t.Fatalf("read back %q: %v", got, err)
	}
	bare, err := filesystem.Open(job.Output)
	if err == nil {
		bare.Close()
		t.Fatal("the output opened without the job's keytab")
	}
	if !errors.Is(err, vfshdfs.ErrKerberos) {
		t.Fatalf("bare open: %v, want a Kerberos error", err)
	}
}
