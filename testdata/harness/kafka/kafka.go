package kafka

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// JVMTestOpts are the JVM flags for brokers and tools in tests: small heap,
// quick start-up on two cores.
var JVMTestOpts = []string{"-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Djava.awt.headless=true"}

// Kafka is a running single-node KRaft Apache Kafka broker.
type Kafka struct {
	// Addr is the PLAINTEXT listener, 127.0.0.1:PORT.
	Addr string
	// Dir holds server.properties and the log dirs.
	Dir  string
	proc *process
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Log4jConfig writes a log4j2 properties file logging at level to stderr.
func Log4jConfig(dir, level string) (string, error) {
	path := filepath.Join(dir, "log4j2-"+strings.ToLower(level)+".properties")
	conf := `status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ` + level + `
rootLogger.appenderRef.stderr.ref = STDERR
logger.kafka.name = kafka
logger.kafka.level = ` + level + `
logger.apache.name = org.apache.kafka
logger.apache.level = ` + level + `
`
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// KafkaOptions tunes StartKafkaProcess.
type KafkaOptions struct {
	// Dir is where the broker keeps its files; it must exist.
	Dir string
	// JVMOpts replace JVMTestOpts when set.
	JVMOpts []string
	// Properties are added to (and override) the generated server.properties.
	Properties map[string]string
	// StartTimeout bounds start-up (default 2 minutes).
	StartTimeout time.Duration
	// Listeners are more listeners beside PLAINTEXT (which the harness
	// keeps for its readiness check) and CONTROLLER, each on a free port
	// written back to Port.
	Listeners []*Listener
	// FormatArgs are added to kafka-storage format, e.g. --add-scram.
	FormatArgs []string
}

// Listener is a named listener of a Kafka broker.
type Listener struct {
	// Name is the listener name (SASL_SSL, MTLS, ...).
	Name string
	// Protocol is its security protocol (SSL, SASL_SSL, SASL_PLAINTEXT).
	Protocol string
	// Port is set by StartKafkaProcess.
	Port int
}

// Addr is 127.0.0.1:Port.
func (l *Listener) Addr() string { return fmt.Sprintf("127.0.0.1:%d", l.Port) }

// StartKafkaProcess formats a KRaft log dir and starts kafka.Kafka on two free
// loopback ports. The caller stops it with Stop.
func StartKafkaProcess(opts KafkaOptions) (*Kafka, error) {
	cp, err := Classpath()
	if err != nil {
		return nil, err
	}
	java, err := JavaPath()
	if err != nil {
		return nil, err
	}
	jvm := opts.JVMOpts
	if jvm == nil {
		jvm = JVMTestOpts
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	cport, err := FreePort()
	for err == nil && cport == port {
		cport, err = FreePort()
	}
	if err != nil {
		return nil, err
	}
	listeners := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", port, cport)
	advertised := fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", port)
	protocols := "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	taken := map[int]bool{port: true, cport: true}
	for _, l := range opts.Listeners {
		p, err := FreePort()
		for err == nil && taken[p] {
			p, err = FreePort()
		}
		if err != nil {
			return nil, err
		}
		taken[p], l.Port = true, p
		listeners += fmt.Sprintf(",%s://127.0.0.1:%d", l.Name, p)
		advertised += fmt.Sprintf(",%s://127.0.0.1:%d", l.Name, p)
		protocols += fmt.Sprintf(",%s:%s", l.Name, l.Protocol)
	}
	dir := opts.Dir
	props := map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"controller.quorum.voters":                         fmt.Sprintf("1@127.0.0.1:%d", cport),
		"listeners":                                        listeners,
		"advertised.listeners":                             advertised,
		"controller.listener.names":                        "CONTROLLER",
		"inter.broker.listener.name":                       "PLAINTEXT",
		"listener.security.protocol.map":                   protocols,
		"log.dirs":                                         filepath.Join(dir, "logs"),
		"num.partitions":                                   "1",
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "1",
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
		"auto.create.topics.enable":                        "true",
	}
	for k, v := range opts.Properties {
		props[k] = v
	}
	var sb strings.Builder
	for k, v := range props {
		fmt.Fprintf(&sb, "%s=%s\n", k, v)
	}
	propsPath := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(propsPath, []byte(sb.String()), 0o644); err != nil {
		return nil, err
	}
	log4j, err := Log4jConfig(dir, "INFO")
	if err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	clusterID := base64.RawURLEncoding.EncodeToString(id)

	base := append(append([]string{}, jvm...), "-Dlog4j2.configurationFile="+log4j, "-cp", cp)
	format := exec.Command(java, append(append([]string{}, base...), "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", propsPath)...)
	format.Args = append(format.Args, opts.FormatArgs...)
	if out, err := format.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kafka harness: kafka-storage format: %v\n%s", err, out)
	}
	cmd := exec.Command(java, append(append([]string{}, base...), "kafka.Kafka", propsPath)...)
	proc, err := startProcess(cmd, nil)
	if err != nil {
		return nil, fmt.Errorf("kafka harness: start kafka.Kafka: %w", err)
	}
	k := &Kafka{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, proc: proc}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if err := k.waitReady(timeout); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

// waitReady polls the broker's metadata until it lists itself.
func (k *Kafka) waitReady(timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr), kgo.RetryTimeout(time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if k.proc.exited() {
			return fmt.Errorf("kafka harness: kafka.Kafka exited during start-up:\n%s", k.proc.out.tail(4000))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := adm.BrokerMetadata(ctx)
		cancel()
		if err == nil && len(m.Brokers) > 0 && m.Controller >= 0 {
			return nil
		}
		last = err
		select {
		case <-k.proc.done:
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("kafka harness: kafka not ready at %s after %s (last error %v):\n%s", k.Addr, timeout, last, k.proc.out.tail(4000))
}

// PID is the broker JVM's process id.
func (k *Kafka) PID() int { return k.proc.cmd.Process.Pid }

// Output is what the broker logged so far.
func (k *Kafka) Output() string { return k.proc.out.String() }

// Stop shuts the broker down (SIGTERM, then SIGKILL after 20 s).
func (k *Kafka) Stop() { k.proc.stop(syscall.SIGTERM, 20*time.Second) }

// startAttempts bounds start-up retries: the free ports are picked before the
// JVM binds them, so another process on the machine can take one in between.
const startAttempts = 3

// startKafkaRetrying starts a broker in a new directory made by mkdir, trying
// again with new ports and a new directory when a start-up fails.
func startKafkaRetrying(mkdir func() (string, error)) (*Kafka, error) {
	return startRetrying(mkdir, func(dir string) (*Kafka, error) { return StartKafkaProcess(KafkaOptions{Dir: dir}) })
}

// startRetrying is startKafkaRetrying for any broker start (a Kafka, a
// SecureKafka).
func startRetrying[K any](mkdir func() (string, error), start func(dir string) (K, error)) (K, error) {
	var errs []error
	for attempt := 0; attempt < startAttempts; attempt++ {
		dir, err := mkdir()
		if err != nil {
			var zero K
			return zero, err
		}
		k, err := start(dir)
		if err == nil {
			return k, nil
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt+1, err))
		if _, cpErr := Classpath(); cpErr != nil {
			break // a missing install is not worth retrying
		}
	}
	var zero K
	return zero, errors.Join(errs...)
}

// StartKafka starts a broker owned by this test and stopped at its cleanup.
func StartKafka(t testing.TB) *Kafka {
	t.Helper()
	k, err := startKafkaRetrying(func() (string, error) { return os.MkdirTemp(t.TempDir(), "kafka-") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}

var shared struct {
	mu      sync.Mutex
	kafka   *Kafka
	err     error
	dir     string
	bins    map[string]builtBinary // sluice binaries by build tags
	cleanup []func()
}

// SharedKafka returns the test binary's one Apache Kafka broker, starting it
// on first use. The test package's TestMain must call Main so it is stopped.
func SharedKafka(t testing.TB) *Kafka {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.kafka == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "sluice-kafka-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
		shared.kafka, shared.err = startKafkaRetrying(func() (string, error) { return os.MkdirTemp(dir, "attempt-") })
		if shared.kafka != nil {
			k := shared.kafka
			shared.cleanup = append(shared.cleanup, func() { k.Stop(); os.RemoveAll(dir) })
		} else {
			os.RemoveAll(dir)
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.kafka
}

// Main runs the tests and then stops what the harness shares between them
// (the Kafka broker, the built sluice binary). Use it as
//
//	func TestMain(m *testing.M) { os.Exit(kafka.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for i := len(shared.cleanup) - 1; i >= 0; i-- {
		shared.cleanup[i]()
	}
	shared.cleanup = nil
	return code
}

// OnExit registers fn to run in Main after the tests, in reverse order of
// registration: for processes shared by several tests.
func OnExit(fn func()) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.cleanup = append(shared.cleanup, fn)
}

// SharedTempDir makes a temporary directory removed by Main after the tests.
func SharedTempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	OnExit(func() { os.RemoveAll(dir) })
	return dir, nil
}
