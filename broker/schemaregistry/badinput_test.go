package schemaregistry

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// checkAnswer: never a 5xx, always Confluent's content type, and an error
// answer is {"error_code": N, "message": "..."} with N matching the status.
func checkAnswer(t testing.TB, what string, a answer) {
	t.Helper()
	if a.status >= 500 {
		t.Fatalf("%s: %d %s", what, a.status, a.body)
	}
	if a.ctype != contentType && !(a.status == 200 && strings.HasPrefix(a.ctype, "text/plain")) {
		t.Fatalf("%s: Content-Type %q", what, a.ctype)
	}
	if a.status >= 300 {
		var e errorBody
		if err := json.Unmarshal(a.body, &e); err != nil || e.Message == "" || (&apiError{code: e.Code}).status() != a.status {
			t.Fatalf("%s: error answer %d %s", what, a.status, a.body)
		}
	} else if !json.Valid(a.body) {
		t.Fatalf("%s: answer is not JSON: %s", what, a.body)
	}
}

func TestBadInput(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistry(t, b.addr)
	if a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userV1)); a.status != 200 {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	huge := `{"schema":"` + strings.Repeat(" ", 70<<10) + `"}`
	for _, c := range []struct {
		method, path, ctype, body string
		code                      int
	}{
		{"POST", "/subjects/s/versions", contentType, `{bad`, codeBadRequest},
		{"POST", "/subjects/s/versions", contentType, ``, codeBadRequest},
		{"POST", "/subjects/s/versions", contentType, `{"schema": 5}`, codeUnprocessable},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "x"} trailing`, codeBadRequest},
		{"POST", "/subjects/s/versions", contentType, `{"schemaType":"AVRO"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "{\"type\":\"record\"}"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "not json"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "{}", "schemaType": "PROTOBUF"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "{", "schemaType": "JSON"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "syntax = \"proto3\"; message M { int32 a = 1; int32 b = 1; }", "schemaType": "PROTOBUF"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "{}", "schemaType": "XML"}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", contentType, `{"schema": "\"int\"", "references": [{"name":"x","subject":"y","version":1}]}`, codeInvalidSchema},
		{"POST", "/subjects/s/versions", "text/plain", string(schemaBody(userV1)), codeUnsupportedMediaType},
		{"POST", "/subjects/s/versions", contentType, huge, codeRequestEntityTooLarge},
		{"POST", "/subjects/%01bad/versions", contentType, string(schemaBody(userV1)), codeInvalidSubject},
		{"POST", "/subjects/s", contentType, `[1,2]`, codeUnprocessable},
		{"POST", "/subjects/s", contentType, string(schemaBody(orderSchema)), codeSchemaNotFound},
		{"POST", "/subjects/nobody", contentType, string(schemaBody(orderSchema)), codeSubjectNotFound},
		{"GET", "/subjects/nobody/versions", "", "", codeSubjectNotFound},
		{"GET", "/subjects/nobody/versions/1", "", "", codeSubjectNotFound},
		{"GET", "/subjects/s/versions/2", "", "", codeVersionNotFound},
		{"GET", "/subjects/s/versions/0", "", "", codeInvalidVersion},
		{"GET", "/subjects/s/versions/-2", "", "", codeInvalidVersion},
		{"GET", "/subjects/s/versions/abc", "", "", codeInvalidVersion},
		{"GET", "/subjects/s/versions/1.5", "", "", codeInvalidVersion},
		{"GET", "/subjects/s/versions/99999999999", "", "", codeInvalidVersion},
		{"GET", "/subjects/s/versions/latest%20", "", "", codeInvalidVersion},
		{"DELETE", "/subjects/s/versions/x", "", "", codeInvalidVersion},
		{"POST", "/compatibility/subjects/s/versions/nope", contentType, string(schemaBody(userV1)), codeInvalidVersion},
		{"POST", "/compatibility/subjects/s/versions/latest", contentType, `{"schema":"{"}`, codeInvalidSchema},
		{"GET", "/schemas/ids/999", "", "", codeSchemaNotFound},
		{"GET", "/schemas/ids/abc", "", "", codeSchemaNotFound},
		{"GET", "/schemas/ids/-1", "", "", codeSchemaNotFound},
		{"GET", "/schemas/ids/999/versions", "", "", codeSchemaNotFound},
		{"PUT", "/config", contentType, `{"compatibility":"MAYBE"}`, codeInvalidCompatibilityLevel},
		{"PUT", "/config/s", contentType, `{}`, codeInvalidCompatibilityLevel},
		{"PUT", "/config/s", contentType, `{"compatibility":`, codeBadRequest},
		{"GET", "/nothing/here", "", "", codeNotFound},
		{"PATCH", "/subjects", "", "", codeMethodNotAllowed},
		{"PUT", "/subjects/s/versions", contentType, `{}`, codeMethodNotAllowed},
	} {
		what := c.method + " " + c.path + " " + strings.TrimSpace(c.body[:min(len(c.body), 60)])
		a := reg.do(t, c.method, c.path, c.ctype, []byte(c.body))
		checkAnswer(t, what, a)
		if got := a.errorCode(); got != c.code {
			t.Errorf("%s: %d %s, want error code %d", what, a.status, a.body, c.code)
		}
	}
	// Bad requests wrote nothing.
	if a := reg.do(t, "GET", "/subjects?deleted=true", "", nil); string(a.body) != `["s"]` {
		t.Fatalf("subjects after bad requests: %s", a.body)
	}
}

// fuzzBroker is one broker and registry shared by every input of a fuzz run.
var fuzzBroker struct {
	once sync.Once
	reg  *testRegistry
}

// FuzzRequest sends arbitrary methods, paths and bodies: the registry
// never answers 5xx, always in Confluent's shape.
func FuzzRequest(f *testing.F) {
	for _, seed := range []struct{ method, path, body string }{
		{"POST", "/subjects/s/versions", string(schemaBody(userV1))},
		{"POST", "/subjects/s/versions", string(schemaBody(userAddReq))},
		{"POST", "/subjects/s", string(schemaBody(userV1))},
		{"POST", "/compatibility/subjects/s/versions/latest?verbose=true", string(schemaBody(userAddDef))},
		{"POST", "/subjects/s/versions", `{"schema":"{\"type\":\"enum\",\"name\":\"e\",\"symbols\":[\"A\"]}"}`},
		{"POST", "/subjects/s/versions", `{"schema":"[\"null\",{\"type\":\"map\",\"values\":\"long\"}]"}`},
		{"POST", "/subjects/s/versions", `{"schema":"{\"type\":\"fixed\",\"name\":\"f\",\"size\":-1}"}`},
		{"POST", "/subjects/s/versions", `{"schema":"{\"type\":\"record\",\"name\":\"n\",\"fields\":[{\"name\":\"a\",\"type\":\"n\"}]}"}`},
		{"GET", "/subjects/s/versions/latest/schema", ""},
		{"DELETE", "/subjects/s/versions/1?permanent=true", ""},
		{"DELETE", "/subjects/s", ""},
		{"PUT", "/config/s", `{"compatibility":"FULL_TRANSITIVE"}`},
		{"GET", "/schemas/ids/1/versions?deleted=true", ""},
		{"GET", "/subjects/%ff/versions", ""},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		fuzzBroker.once.Do(func() { fuzzBroker.reg = startSharedRegistry(t) })
		switch method {
		case "GET", "POST", "PUT", "DELETE":
		default:
			method = "POST"
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " #\x00\r\n\t") {
			return // not a request line an HTTP client can send
		}
		req, err := http.NewRequest(method, fuzzBroker.reg.url+path, strings.NewReader(string(body)))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type")}
		a.body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if a.status == http.StatusBadRequest && a.ctype != contentType {
			return // Go's HTTP server refused the request line itself
		}
		checkAnswer(t, method+" "+path, a)
	})
}

// startSharedRegistry starts a broker and a registry that live as long as
// the fuzzing process (each fuzz input is its own test, so nothing may
// belong to one: no t.TempDir, no logging to t).
func startSharedRegistry(t *testing.T) *testRegistry {
	dir, err := os.MkdirTemp("", "sluice-registry-fuzz-")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := sluice.NewBroker(sluice.BrokerOptions{DataDir: dir, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg, err := New(ctx, Options{Bootstrap: []string{b.Addr}, Logger: quiet, MaxRequestBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reg.Serve(ln) }()
	return &testRegistry{Registry: reg, url: "http://" + ln.Addr().String()}
}

// TestBodiesInFlightBounded: a request whose body is in but that cannot get
// a work slot waits, then gives up with 50002 at the write timeout.
func TestBodiesInFlightBounded(t *testing.T) {
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{Bootstrap: []string{b.addr}, WriteTimeout: 500 * time.Millisecond})
	for range cap(reg.slots) {
		reg.slots <- struct{}{} // every slot held, as by requests at work
	}
	a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userV1))
	if a.status != 500 || a.errorCode() != codeOperationTimeout {
		t.Fatalf("with every work slot held: %d %s", a.status, a.body)
	}
	if a := reg.do(t, "GET", "/subjects", "", nil); a.status != 200 {
		t.Fatalf("a request without a body is not held back: %d %s", a.status, a.body)
	}
	<-reg.slots
	if a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userV1)); a.status != 200 {
		t.Fatalf("with a slot free: %d %s", a.status, a.body)
	}
	if n := reg.bodyBytes.inUse(); n != 0 {
		t.Fatalf("%d body bytes still held after the requests", n)
	}
}
