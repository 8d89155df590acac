package interop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// aclCommandClass is kafka-acls.sh's main class in Apache Kafka 4.1.
const aclCommandClass = "org.apache.kafka.tools.AclCommand"

// TestKafkaAclsAgainstSecureSluice: Apache Kafka 4.1's kafka-acls, with a
// command config of the super user (SASL_PLAINTEXT, SCRAM-SHA-512), adds,
// lists and removes literal and prefixed ACLs on a sluice broker whose
// authorizer is on (Kafka's StandardAuthorizer class name); alice may
// produce while her WRITE is there and is refused once it is removed; a
// kafka-acls run as alice (no ALTER on the cluster) is refused.
func TestKafkaAclsAgainstSecureSluice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	data, dir := t.TempDir(), t.TempDir()
	for _, u := range []string{"admin", "alice"} {
		mustCLI(t, ctx, u+"-pw\n", "users", "set", u, "--mechanism", "SCRAM-SHA-512", "--password-stdin", "--data-dir", data)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("server.properties", strings.Join([]string{
		"listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:admin",
		"num.partitions=1",
	}, "\n")+"\n")
	s, err := kafka.StartSluiceProcess(kafka.SluiceBinary(t), data, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	var addr string
	for deadline := time.Now().Add(30 * time.Second); addr == ""; time.Sleep(50 * time.Millisecond) {
		if m := listenerLine.FindStringSubmatch(s.Output()); m != nil {
			addr = m[2]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker printed no listener:\n%s", s.Output())
		}
	}
	commandConfig := func(user string) string {
		return write(user+".properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
			fmt.Sprintf("sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=%q password=%q;\n", user, user+"-pw"))
	}
	admin, alice := commandConfig("admin"), commandConfig("alice")
	acls := func(config string, args ...string) (string, error) {
		res, err := kafka.JavaTool(t, ctx, nil, aclCommandClass, append([]string{"--bootstrap-server", addr, "--command-config", config}, args...)...)
		if err != nil {
			return string(res.Stdout) + string(res.Stderr), err
		}
		return string(res.Stdout), nil
	}
	mustACLs := func(args ...string) string {
		t.Helper()
		out, err := acls(admin, args...)
		if err != nil {
			t.Fatalf("kafka-acls %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	produce := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha512Mechanism()),
			kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr()
	}

	mustACLs("--add", "--allow-principal", "User:alice", "--operation", "Write", "--operation", "Create", "--operation", "Read", "--topic", "orders")
	mustACLs("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app-", "--resource-pattern-type", "prefixed")
	mustACLs("--add", "--deny-principal", "User:alice", "--deny-host", "10.0.0.1", "--operation", "All", "--topic", "orders")
	list := mustACLs("--list")
	for _, want := range []string{
		"ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
		"(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)",
		"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
		"(principal=User:alice, host=10.0.0.1, operation=ALL, permissionType=DENY)",
		"ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)",
	} {
		if !strings.Contains(list, want) {
			t.Fatalf("kafka-acls --list lacks %s:\n%s", want, list)
		}
	}
	// --list --group app-1 --resource-pattern-type match: the prefixed ACL applies.
	if out := mustACLs("--list", "--group", "app-1", "--resource-pattern-type", "match"); !strings.Contains(out, "name=app-, patternType=PREFIXED") {
		t.Fatalf("kafka-acls --list match for app-1 lacks the prefixed ACL:\n%s", out)
	}
	if err := produce(); err != nil {
		t.Fatalf("alice with WRITE on orders (a DENY only from another host): %v", err)
	}
	mustACLs("--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders", "--force")
	list = mustACLs("--list", "--topic", "orders")
	if strings.Contains(list, "operation=WRITE") || !strings.Contains(list, "operation=READ") {
		t.Fatalf("after removing WRITE, kafka-acls --list --topic orders:\n%s", list)
	}
	// alice still has READ (so DESCRIBE) on orders but WRITE on no topic:
	// the idempotent producer's InitProducerId is refused first, as on Kafka
	// (IDEMPOTENT_WRITE on the cluster, or WRITE on some topic).
	if err := produce(); !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice after her WRITE was removed: %v, want CLUSTER_ or TOPIC_AUTHORIZATION_FAILED", err)
	}
	out, err := acls(alice, "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "*")
	if !strings.Contains(out, "ClusterAuthorizationException") {
		t.Fatalf("kafka-acls --add as alice (err %v) did not report ClusterAuthorizationException:\n%s", err, out)
	}
	t.Logf("kafka-acls as alice refused: %s", firstLineWith(out, "Authorization"))
	if list := mustACLs("--list", "--topic", "*"); strings.Contains(list, "name=*") {
		t.Fatalf("alice's refused --add left an ACL:\n%s", list)
	}
}
