package schemaregistry

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The bounds on one request's work: a costly compatibility check holds no
// lock, and a body that arrives slowly (or is too large) holds no slot.

// waitFor receives from ch, failing the test if nothing comes within the
// test's own bound.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(2 * time.Minute):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}

// rawRequest sends the request line and headers of method path declaring a
// body of length bytes, then only body (which may be shorter).
func rawRequest(t *testing.T, reg *testRegistry, method, path string, length int, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(reg.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: registry\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", method, path, contentType, length, body); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readAnswer reads the answer to a rawRequest.
func readAnswer(t *testing.T, conn net.Conn) answer {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
}

// TestHugeSchemaCheckDoesNotBlockOthers: while the compatibility check of a
// 15,000-field schema is running (held at its start by a hook), a small
// registration and GET /subjects complete; the check then runs out of its
// bound and is answered 42201 naming it. For every route that checks.
func TestHugeSchemaCheckDoesNotBlockOthers(t *testing.T) {
	var armed atomic.Bool
	started, release := make(chan struct{}), make(chan struct{})
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{
		Bootstrap: []string{b.addr}, MaxRequestBytes: 1 << 20, MaxCheckSteps: 30_000,
		hooks: hooks{checking: func(subject string) {
			if subject == "huge" && armed.CompareAndSwap(true, false) {
				started <- struct{}{}
				<-release
			}
		}},
	})
	t.Cleanup(func() { // a failed test lets a held check go
		select {
		case <-release:
		default:
			close(release)
		}
	})
	if a := reg.do(t, "POST", "/subjects/huge/versions", contentType, schemaBody(wideRecord(15000, false))); a.status != 200 {
		t.Fatalf("register the first version: %d %s", a.status, a.body)
	}
	next := schemaBody(wideRecord(15000, true))
	for i, path := range []string{
		"/subjects/huge/versions",
		"/compatibility/subjects/huge/versions/latest",
		"/compatibility/subjects/huge/versions",
	} {
		armed.Store(true)
		done := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequest("POST", reg.url+path, strings.NewReader(string(next)))
			req.Header.Set("Content-Type", contentType)
			a := answer{}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				a.status, a.ctype = resp.StatusCode, resp.Header.Get("Content-Type")
				a.body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			done <- a
		}()
		waitFor(t, started, "the huge check to start")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		small := fmt.Sprintf("small-%d", i)
		if _, err := reg.client.CreateSchema(ctx, small, avroSchema(userV1)); err != nil {
			t.Fatalf("%s: a small registration while the huge check runs: %v", path, err)
		}
		cancel()
		if a := reg.do(t, "GET", "/subjects", "", nil); a.status != 200 || !strings.Contains(string(a.body), small) {
			t.Fatalf("%s: GET /subjects while the huge check runs: %d %s", path, a.status, a.body)
		}
		close(release)
		a := waitFor(t, done, "the huge request's answer")
		release = make(chan struct{})
		checkAnswer(t, path, a)
		if a.status != 422 || a.errorCode() != codeInvalidSchema || !strings.Contains(string(a.body), "30000 steps") {
			t.Fatalf("%s: the huge check past its bound: %d %s", path, a.status, a.body)
		}
	}
	if a := reg.do(t, "GET", "/subjects/huge/versions", "", nil); string(a.body) != "[1]" {
		t.Fatalf("versions of huge: %s", a.body)
	}
}

// TestRegistrationRecheckedWhenSubjectChanged: a registration checked
// against a version that a concurrent registration has since followed is
// checked again against the new one (here: incompatible, 409), never
// written on the strength of the stale check.
func TestRegistrationRecheckedWhenSubjectChanged(t *testing.T) {
	var armed atomic.Bool
	var checks atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{
		Bootstrap: []string{b.addr},
		hooks: hooks{checking: func(string) {
			checks.Add(1)
			if armed.CompareAndSwap(true, false) {
				close(started)
				<-release
			}
		}},
	})
	if a := reg.do(t, "POST", "/subjects/s/versions", contentType, schemaBody(userV1)); a.status != 200 {
		t.Fatalf("v1: %d %s", a.status, a.body)
	}
	checks.Store(0)
	armed.Store(true)
	t.Cleanup(func() { // a failed test lets a held check go
		select {
		case <-release:
		default:
			close(release)
		}
	})
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", reg.url+"/subjects/s/versions", strings.NewReader(string(schemaBody(userAddDef))))
		a := answer{}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			a.status = resp.StatusCode
			a.body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- a
	}()
	waitFor(t, started, "the first check to start")
	// userAddDef reads v1's data, but not that of userNoName (no name).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := reg.client.CreateSchema(ctx, "s", avroSchema(userNoName)); err != nil {
		t.Fatalf("the concurrent registration while the first is checked: %v", err)
	}
	close(release)
	a := waitFor(t, done, "the first registration's answer")
	if a.status != 409 || a.errorCode() != codeIncompatibleSchema {
		t.Fatalf("the registration checked against v1 only: %d %s, want 409 against v2", a.status, a.body)
	}
	if n := checks.Load(); n != 3 {
		t.Fatalf("%d checks, want 3 (first, concurrent, first again)", n)
	}
	if a := reg.do(t, "GET", "/subjects/s/versions", "", nil); string(a.body) != "[1,2]" {
		t.Fatalf("versions: %s", a.body)
	}
}

// TestSlowBodiesDoNotBlockPosts: more connections than there are work slots
// send their headers and a few bytes of body and stay; a normal POST still
// registers, and once they leave nothing they held is left over.
func TestSlowBodiesDoNotBlockPosts(t *testing.T) {
	reading := make(chan struct{}, 2*maxBodiesInFlight)
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{
		Bootstrap: []string{b.addr}, BodyTimeout: 10 * time.Minute,
		hooks: hooks{readingBody: func() { reading <- struct{}{} }},
	})
	const slow = maxBodiesInFlight + 8
	conns := make([]net.Conn, slow)
	for i := range conns {
		conns[i] = rawRequest(t, reg, "POST", "/subjects/slow/versions", 1000, `{"sch`)
	}
	for i := range slow {
		waitFor(t, reading, fmt.Sprintf("slow body %d to be read", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := reg.client.CreateSchema(ctx, "normal", avroSchema(userV1)); err != nil {
		t.Fatalf("a normal POST while %d bodies trickle in: %v", slow, err)
	}
	if _, err := reg.client.LookupSchema(ctx, "normal", avroSchema(userV1)); err != nil {
		t.Fatalf("a normal lookup while %d bodies trickle in: %v", slow, err)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	reg.close() // waits for the slow requests' handlers
	if n := reg.bodyBytes.inUse(); n != 0 {
		t.Fatalf("%d body bytes still held", n)
	}
	if n := len(reg.slots); n != 0 {
		t.Fatalf("%d work slots still held", n)
	}
}

// TestBodyEndpointsRefuseSlowAndOversizedBodies: on every route that takes
// a body, a body that does not arrive within the body timeout is answered
// 408 without the request ever holding a work slot, and a body over the
// size bound is answered 413, at once when its length is declared.
func TestBodyEndpointsRefuseSlowAndOversizedBodies(t *testing.T) {
	var readings atomic.Int32
	reading := make(chan struct{}, 16)
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{
		Bootstrap: []string{b.addr}, BodyTimeout: 500 * time.Millisecond,
		hooks: hooks{readingBody: func() { readings.Add(1); reading <- struct{}{} }},
	})
	if a := reg.do(t, "POST", "/subjects/t/versions", contentType, schemaBody(userV1)); a.status != 200 {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	<-reading
	limit := 64 << 10 // startRegistryWith's MaxRequestBytes
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/subjects/t/versions", string(schemaBody(userAddDef))},
		{"POST", "/subjects/t", string(schemaBody(userV1))},
		{"POST", "/compatibility/subjects/t/versions", string(schemaBody(userAddDef))},
		{"POST", "/compatibility/subjects/t/versions/latest", string(schemaBody(userAddDef))},
		{"POST", "/compatibility/subjects/t/versions/1", string(schemaBody(userAddDef))},
		{"PUT", "/config", `{"compatibility":"BACKWARD"}`},
		{"PUT", "/config/t", `{"compatibility":"FULL"}`},
	} {
		what := c.method + " " + c.path
		conn := rawRequest(t, reg, c.method, c.path, len(c.body), c.body[:5])
		waitFor(t, reading, what+": the slow body to be read")
		if n := len(reg.slots); n != 0 {
			t.Fatalf("%s: %d work slots held while the body arrives", what, n)
		}
		if n := reg.bodyBytes.inUse(); n > bodyChunk+5 {
			t.Errorf("%s: %d body bytes held for 5 bytes arrived", what, n)
		}
		a := readAnswer(t, conn)
		checkAnswer(t, what+" slow", a)
		if a.status != http.StatusRequestTimeout || a.errorCode() != codeRequestTimeout {
			t.Errorf("%s: slow body answered %d %s, want 408", what, a.status, a.body)
		}

		before := readings.Load()
		a = readAnswer(t, rawRequest(t, reg, c.method, c.path, limit+1, ""))
		checkAnswer(t, what+" declared too large", a)
		if a.status != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: a declared length over the bound answered %d %s, want 413", what, a.status, a.body)
		}
		if readings.Load() != before {
			t.Errorf("%s: a body declared too large was read", what)
		}

		big := io.MultiReader(strings.NewReader(c.body), strings.NewReader(strings.Repeat(" ", limit)))
		req, _ := http.NewRequest(c.method, reg.url+c.path, big) // unknown length: chunked
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s chunked: %v", what, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: a chunked body over the bound answered %d %s, want 413", what, resp.StatusCode, body)
		}
		waitFor(t, reading, what+": the chunked body to be read")
		if n := reg.bodyBytes.inUse(); n != 0 {
			t.Errorf("%s: %d body bytes held after the answers", what, n)
		}

		if a := reg.do(t, c.method, c.path, contentType, []byte(c.body)); a.status != 200 && a.status != 409 {
			t.Errorf("%s: the same request sent at once: %d %s", what, a.status, a.body)
		}
		waitFor(t, reading, what+": the normal body to be read")
	}
}
