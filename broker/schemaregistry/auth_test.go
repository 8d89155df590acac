package schemaregistry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/crypto/bcrypt"

	"github.com/sluicehq/sluice/testdata/harness/certs"
)

func TestParseAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ParseAuth("# users\nalice:"+string(hash)+"\nbob:"+HashSHA256([]byte("salt"), "bob pw")+"\n\ncarol:plain:carol-pw\n",
		"alice * write\nbob orders- read\n", true)
	if err != nil {
		t.Fatal(err)
	}
	basic := func(user, pass string) *http.Request {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.SetBasicAuth(user, pass)
		return r
	}
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{{"alice", "alice-pw", true}, {"alice", "alice-pw", true}, {"alice", "bob pw", false}, {"bob", "bob pw", true},
		{"bob", "bob", false}, {"carol", "carol-pw", true}, {"carol", "carol-pw ", false}, {"dave", "alice-pw", false}} {
		if _, ok, _ := a.authenticate(context.Background(), basic(c.user, c.pass)); ok != c.ok {
			t.Errorf("%s with %q: authenticated %v, want %v", c.user, c.pass, ok, c.ok)
		}
	}
	for _, c := range []struct {
		user, subject string
		write, ok     bool
	}{{"alice", "x", true, true}, {"alice", "", true, true}, {"bob", "orders-value", false, true}, {"bob", "orders-value", true, false},
		{"bob", "users-value", false, false}, {"bob", "", false, false}, {"carol", "orders-value", false, false}} {
		if got := a.may(c.user, c.subject, c.write); got != c.ok {
			t.Errorf("may(%s, %q, write %v) = %v, want %v", c.user, c.subject, c.write, got, c.ok)
		}
	}
	for _, c := range []struct{ passwords, roles, want string }{
		{"alice\n", "", "line 1: want USER:SECRET"},
		{"alice:s3cret\n", "", "must start with $2 (bcrypt), sha256: or plain:"},
		{"alice:$2a$10$short\n", "", "not a bcrypt hash"},
		{"alice:sha256:zz:00\n", "", "want sha256:<salt hex>:<64 hex digits>"},
		{"alice:plain:a\nalice:plain:b\n", "", "line 2: user \"alice\" is listed twice"},
		{"# nobody\n", "", "no user"},
		{"alice:plain:a\n", "alice * admin\n", "role file line 1: want USER SUBJECT-PREFIX read|write"},
		{"alice:plain:a\n", "mallory * read\n", `user "mallory" is not in the password file`},
	} {
		_, err := ParseAuth(c.passwords, c.roles, c.roles != "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q / %q: got %v, want ...%s...", c.passwords, c.roles, err, c.want)
		}
		if err != nil && strings.Contains(c.passwords, "s3cret") && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}

// TestBcryptComparedOncePerPassword: bcrypt costs tens of milliseconds a
// comparison and any client can ask for one, so a client authenticating
// every request with its password, or retrying a stale one, costs one
// comparison, not one a request; and the comparisons at once are bounded.
func TestBcryptComparedOncePerPassword(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	a, err := ParseAuth("alice:"+string(hash)+"\n", "", false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	compared, inFlight, most := 0, 0, 0
	real := compareBcrypt
	compareBcrypt = func(h, p []byte) error {
		mu.Lock()
		compared, inFlight = compared+1, inFlight+1
		most = max(most, inFlight)
		mu.Unlock()
		err := real(h, p)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return err
	}
	t.Cleanup(func() { compareBcrypt = real })
	try := func(pass string) bool {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.SetBasicAuth("alice", pass)
		_, ok, busy := a.authenticate(context.Background(), r)
		if busy != nil {
			t.Fatal(busy)
		}
		return ok
	}
	for i := 0; i < 5; i++ {
		if try("stale-pw") {
			t.Fatal("a wrong password accepted")
		}
		if !try("alice-pw") {
			t.Fatal("the password refused")
		}
	}
	if compared != 2 {
		t.Errorf("10 requests with 2 passwords cost %d bcrypt comparisons, want 2", compared)
	}
	// Many different wrong passwords at once: each is compared, but no more
	// at once than the hashing slots.
	var wg sync.WaitGroup
	for i := 0; i < 4*cap(a.hashing); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			try(fmt.Sprint("guess-", i))
		}()
	}
	wg.Wait()
	if most > cap(a.hashing) {
		t.Errorf("%d bcrypt comparisons at once, want at most %d", most, cap(a.hashing))
	}
}

// TestRegistryTLSAndAuth: a registry serving HTTPS with basic auth and
// per-subject grants. franz-go's sr client and Confluent's Python
// serializer authenticate unchanged; a wrong password gets 401, a missing
// grant 403, both counted; a reader lists only the subjects it may read.
func TestRegistryTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("registry CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.Write(dir, "ca")
	server, _ := ca.Issue("registry", certs.Options{Hosts: []string{"127.0.0.1"}})
	pair, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("alice-pw"), bcrypt.MinCost)
	auth, err := ParseAuth("alice:"+string(hash)+"\nbob:"+HashSHA256([]byte{1, 2, 3}, "bob-pw")+"\n", "alice * write\nbob orders- read\n", true)
	if err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, "")
	reg := startRegistryWith(t, Options{Bootstrap: []string{b.addr}, Auth: auth,
		TLS: &tls.Config{Certificates: []tls.Certificate{pair}}})
	url := strings.Replace(reg.url, "http://", "https://", 1)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	client := func(user, pass string) *sr.Client {
		opts := []sr.ClientOpt{sr.URLs(url), sr.HTTPClient(httpClient)}
		if user != "" {
			opts = append(opts, sr.BasicAuth(user, pass))
		}
		cl, err := sr.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ctx := testContext(t)
	alice, bob := client("alice", "alice-pw"), client("bob", "bob-pw")
	orders, err := alice.CreateSchema(ctx, "orders-value", avroSchema(orderSchema))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateSchema(ctx, "users-value", avroSchema(userV1)); err != nil {
		t.Fatal(err)
	}
	if s, err := bob.SchemaByVersion(ctx, "orders-value", -1); err != nil || s.ID != orders.ID {
		t.Errorf("bob reads orders-value: %+v %v", s, err)
	}
	if s, err := bob.SchemaByID(ctx, orders.ID); err != nil || s.Schema == "" {
		t.Errorf("bob reads a schema by id: %v", err)
	}
	if subjects, err := bob.Subjects(ctx); err != nil || !slices.Equal(subjects, []string{"orders-value"}) {
		t.Errorf("bob lists %v (%v), want only orders-value", subjects, err)
	}
	// The same schema under a subject bob may not read: the subjects and
	// versions of its id name only what he may read, as GET /subjects.
	if s, err := alice.CreateSchema(ctx, "users-orders", avroSchema(orderSchema)); err != nil || s.ID != orders.ID {
		t.Fatalf("alice registers the orders schema again: %+v %v", s, err)
	}
	if subjects, err := bob.SubjectsByID(ctx, orders.ID); err != nil || !slices.Equal(subjects, []string{"orders-value"}) {
		t.Errorf("bob lists the subjects of id %d: %v (%v), want only orders-value", orders.ID, subjects, err)
	}
	if usages, err := bob.SchemaUsagesByID(ctx, orders.ID); err != nil || len(usages) != 1 || usages[0].Subject != "orders-value" {
		t.Errorf("bob lists the versions of id %d: %+v (%v), want only orders-value's", orders.ID, usages, err)
	}
	if subjects, err := alice.SubjectsByID(ctx, orders.ID); err != nil || len(subjects) != 2 {
		t.Errorf("alice lists the subjects of id %d: %v (%v), want both", orders.ID, subjects, err)
	}
	forbidden := testCounter(reg.metrics.authFailures.WithLabelValues("forbidden"))
	if _, err := bob.CreateSchema(ctx, "orders-value", avroSchema(orderSchema)); srCode(err) != codeForbidden {
		t.Errorf("bob writes orders-value: %v, want 40301", err)
	}
	if _, err := bob.SchemaByVersion(ctx, "users-value", -1); srCode(err) != codeForbidden {
		t.Errorf("bob reads users-value: %v, want 40301", err)
	}
	if got := testCounter(reg.metrics.authFailures.WithLabelValues("forbidden")); got != forbidden+2 {
		t.Errorf("forbidden counted %v, want %v", got, forbidden+2)
	}
	unauth := testCounter(reg.metrics.authFailures.WithLabelValues("unauthenticated"))
	for _, cl := range []*sr.Client{client("alice", "bob-pw"), client("mallory", "alice-pw"), client("", "")} {
		if _, err := cl.Subjects(ctx); srCode(err) != codeUnauthorized {
			t.Errorf("bad credentials: %v, want 401", err)
		}
	}
	if got := testCounter(reg.metrics.authFailures.WithLabelValues("unauthenticated")); got != unauth+3 {
		t.Errorf("unauthenticated counted %v, want %v", got, unauth+3)
	}
	// Plain HTTP on the HTTPS port, and HTTPS without trusting the CA.
	if resp, err := http.Get(reg.url + "/subjects"); err == nil && resp.StatusCode == http.StatusOK {
		t.Error("plain HTTP served")
	}
	if _, err := http.Get(url + "/subjects"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an untrusted certificate: %v", err)
	}

	// Confluent's Python serializer, configured as its users do.
	confluentClient(t, "produce", "--bootstrap", b.addr, "--registry", url, "--topic", "orders-py", "--count", "3",
		"--user-info", "alice:alice-pw", "--ca", caFile)
	if _, err := alice.SchemaByVersion(ctx, "orders-py-value", -1); err != nil {
		t.Errorf("the Python serializer's registration: %v", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("python3", "testdata/confluent_client.py", "produce", "--bootstrap", b.addr, "--registry", url,
		"--topic", "orders-py2", "--count", "1", "--user-info", "alice:wrong", "--ca", caFile)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "401") {
		t.Errorf("the Python serializer with a wrong password: %v\n%s", err, stderr.String())
	}
}
