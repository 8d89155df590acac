package security

import (
	"crypto/tls"
	"os"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/tlscerts"
)

// TestTLSReloadReadsEachChangeOnce: handshakes stat the keystore and
// truststore files but read them only when one changed; a broken
// replacement is read once (not on every handshake after it), reported once,
// and the previous certificate stays in use until the file changes again.
func TestTLSReloadReadsEachChangeOnce(t *testing.T) {
	pki := tlscerts.New(t)
	var mu sync.Mutex
	reads := map[string]int{}
	readFile = func(name string) ([]byte, error) {
		mu.Lock()
		reads[name]++
		mu.Unlock()
		return os.ReadFile(name)
	}
	t.Cleanup(func() { readFile = os.ReadFile })
	var reported []error
	tt, err := NewTLS(TLSOptions{KeystoreLocation: pki.ServerFile, TruststoreLocation: pki.CAFile}, func(err error) { reported = append(reported, err) })
	if err != nil {
		t.Fatal(err)
	}
	served := func() *tls.Certificate {
		t.Helper()
		c, err := tt.Config().GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return &c.Certificates[0]
	}
	handshakes := func(n int) *tls.Certificate {
		var c *tls.Certificate
		for range n {
			c = served()
		}
		return c
	}
	want := func(what string, keystore, truststore, nReported int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if reads[pki.ServerFile] != keystore || reads[pki.CAFile] != truststore || len(reported) != nReported {
			t.Fatalf("%s: keystore read %d times, truststore %d, %d reloads reported; want %d, %d, %d",
				what, reads[pki.ServerFile], reads[pki.CAFile], len(reported), keystore, truststore, nReported)
		}
	}
	first := handshakes(20)
	want("20 handshakes, nothing changed", 1, 1, 0)

	broken := pki.Dir + "/broken.pem"
	if err := os.WriteFile(broken, []byte("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(broken, pki.ServerFile); err != nil {
		t.Fatal(err)
	}
	if got := handshakes(20); string(got.Certificate[0]) != string(first.Certificate[0]) {
		t.Fatal("a broken keystore replaced the certificate in use")
	}
	want("20 handshakes after a broken replacement", 2, 1, 1)
	if reported[0] == nil || tt.LastReloadError() == nil {
		t.Fatalf("broken replacement reported as %v (LastReloadError %v), want an error", reported[0], tt.LastReloadError())
	}

	renewed, _, _ := pki.Server(t, "server-renewed")
	if err := os.Rename(renewed, pki.ServerFile); err != nil {
		t.Fatal(err)
	}
	if got := handshakes(20); string(got.Certificate[0]) == string(first.Certificate[0]) {
		t.Fatal("the renewed certificate is not served")
	}
	want("20 handshakes after the renewal", 3, 2, 2)
	if reported[1] != nil || tt.LastReloadError() != nil {
		t.Fatalf("renewal reported as %v (LastReloadError %v), want nil", reported[1], tt.LastReloadError())
	}
}
