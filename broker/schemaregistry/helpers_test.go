package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// The tests run against a real sluice broker (broker/server in process,
// on a real data directory) and talk to the registry over HTTP with
// franz-go's sr client or plain requests.

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("SLUICE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
}

// testBroker is an in-process sluice broker on 127.0.0.1.
type testBroker struct {
	*sluice.Broker
	addr string
	dir  string
}

// startBroker starts a broker on dir ("" = a new temp dir) and stops it at
// cleanup unless stopped before.
func startBroker(t testing.TB, dir string) *testBroker {
	t.Helper()
	return startBrokerAt(t, dir, "127.0.0.1:0")
}

// startBrokerAt is startBroker on a given address (a restart keeps the
// address its clients know).
func startBrokerAt(t testing.TB, dir, listen string) *testBroker {
	t.Helper()
	b := sluice.StartBroker(t, sluice.BrokerOptions{DataDir: dir, Listen: listen, Logger: testLogger(t)})
	return &testBroker{Broker: b, addr: b.Addr, dir: b.DataDir}
}

func (b *testBroker) stop() { _ = b.Stop() }

// testRegistry is a registry serving HTTP on 127.0.0.1.
type testRegistry struct {
	*Registry
	url    string
	client *sr.Client
}

func startRegistry(t testing.TB, brokerAddr string) *testRegistry {
	t.Helper()
	return startRegistryWith(t, Options{Bootstrap: []string{brokerAddr}})
}

func startRegistryWith(t testing.TB, opts Options) *testRegistry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts.Logger = testLogger(t)
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = 64 << 10
	}
	reg, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("start registry: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reg.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	tr := &testRegistry{Registry: reg, url: url, client: cl}
	t.Cleanup(tr.close)
	return tr
}

func (r *testRegistry) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = r.Close(ctx)
}

// answer is a decoded HTTP answer.
type answer struct {
	status int
	ctype  string
	body   []byte
}

// errorCode is the Confluent error_code of the answer, 0 if none.
func (a answer) errorCode() int {
	var e errorBody
	_ = json.Unmarshal(a.body, &e)
	return e.Code
}

func (r *testRegistry) do(t testing.TB, method, path, ctype string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, r.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
}

// schemaBody is a request body carrying schema.
func schemaBody(schema string) []byte {
	b, _ := json.Marshal(map[string]string{"schema": schema})
	return b
}

// srCode is the Confluent error code of an sr client error, 0 if none.
func srCode(err error) int {
	var re *sr.ResponseError
	if e, ok := err.(*sr.ResponseError); ok {
		re = e
	}
	if re == nil {
		return 0
	}
	return re.ErrorCode
}

func avroSchema(s string) sr.Schema { return sr.Schema{Schema: s, Type: sr.TypeAvro} }

const (
	userV1      = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`
	userAddDef  = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"email","type":["null","string"],"default":null}]}`
	userAddReq  = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"age","type":"int"}]}`
	userNoName  = `{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"}]}`
	userSpaced  = "{\n  \"name\" : \"com.example.User\",\n  \"type\" : \"record\",\n  \"fields\" : [ {\"type\":\"long\",\"name\":\"id\"}, {\"name\":\"name\",\"type\":{\"type\":\"string\"}} ]\n}"
	orderSchema = `{"type":"record","name":"Order","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}`
)

func testCounter(c interface {
	Write(*dto.Metric) error
}) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
