package kafka

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Result is the output of a finished client process.
type Result struct {
	Stdout []byte
	Stderr []byte
}

// run runs a command with stdin and a deadline and returns its output; a
// non-zero exit is an error carrying stderr.
func run(ctx context.Context, name string, stdin io.Reader, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := Result{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	if err != nil {
		return res, fmt.Errorf("%s %s: %w\nstderr:\n%s", name, strings.Join(args, " "), err, tail(errb.String(), 4000))
	}
	return res, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Kcat runs kcat with args and stdin (may be nil), failing the test if kcat
// is missing; it returns kcat's result and error so tests can check both.
func Kcat(t testing.TB, ctx context.Context, stdin io.Reader, args ...string) (Result, error) {
	t.Helper()
	path, err := KcatPath()
	if err != nil {
		t.Fatal(err)
	}
	return run(ctx, path, stdin, args...)
}

// JavaTool runs a main class from the Kafka jars (e.g.
// org.apache.kafka.tools.ConsoleProducer) with the test JVM flags and a
// WARN-level log4j2 configuration.
func JavaTool(t testing.TB, ctx context.Context, stdin io.Reader, mainClass string, args ...string) (Result, error) {
	t.Helper()
	cp, err := Classpath()
	if err != nil {
		t.Fatal(err)
	}
	java, err := JavaPath()
	if err != nil {
		t.Fatal(err)
	}
	log4j, err := Log4jConfig(t.TempDir(), "WARN")
	if err != nil {
		t.Fatal(err)
	}
	full := append(append([]string{}, JVMTestOpts...), "-Dlog4j2.configurationFile="+log4j, "-cp", cp, mainClass)
	return run(ctx, java, stdin, append(full, args...)...)
}

// Java main classes of the Apache Kafka 4.1 tools.
const (
	ConsoleProducerClass     = "org.apache.kafka.tools.ConsoleProducer"
	ConsoleConsumerClass     = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	ProducerPerformanceClass = "org.apache.kafka.tools.ProducerPerformance"
	ConsumerPerformanceClass = "org.apache.kafka.tools.ConsumerPerformance"
)
