package security

import (
	"crypto/pbkdf2"
	"errors"
	"hash"
	"sync"
	"testing"
	"time"
)

// TestIterationBoundsBeforeWork: the iteration count bounds the PBKDF2 work
// the broker does, so a count outside MinIterations..MaxIterations is
// refused before any derivation: NewCredential (sluice users set
// --iterations) errs at once, and Verify (PLAIN, for an unauthenticated
// client) refuses a stored credential of 2^30 iterations instead of
// deriving for minutes. The deadline is a thousand times what the bounded
// work takes; unbounded, either call runs for minutes.
func TestIterationBoundsBeforeWork(t *testing.T) {
	good, err := NewCredential(ScramSHA512, "secret", MaxIterations)
	if err != nil {
		t.Fatal(err)
	}
	if !good.Verify("secret") || good.Verify("wrong") {
		t.Fatal("Verify of a MaxIterations credential")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := NewCredential(ScramSHA512, "secret", 1<<30); !errors.Is(err, ErrInvalidCredential) {
			t.Errorf("NewCredential with 2^30 iterations: %v, want ErrInvalidCredential", err)
		}
		huge := good
		huge.Iterations = 1 << 30
		if huge.Verify("secret") {
			t.Error("Verify of a 2^30-iteration credential succeeded, want it refused")
		}
		parsed, err := ParseCredential(ScramSHA512, huge.String())
		if err != nil || parsed.Iterations != 1<<30 {
			t.Errorf("ParseCredential of a 2^30-iteration credential: %v, %d (SCRAM, where the client derives, serves it)", err, parsed.Iterations)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a 2^30-iteration count was derived, not refused")
	}
}

// TestOneLookupPerAuthentication: PLAIN, which accepts either SCRAM
// credential, reads the user store once per attempt, for a user with only
// SCRAM-SHA-256 and for an unknown user alike (each read is a ZooKeeper
// round trip in a cluster, for an unauthenticated client).
func TestOneLookupPerAuthentication(t *testing.T) {
	c256, err := NewCredential(ScramSHA256, "secret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]map[string]string{"bob": {ScramSHA256: c256.String()}}
	lookups := 0
	lookup := func(user string) (map[string]string, error) { lookups++; return users[user], nil }
	for _, tc := range []struct {
		user, password string
		ok             bool
	}{{"bob", "secret", true}, {"bob", "wrong", false}, {"mallory", "x", false}} {
		lookups = 0
		conv, err := NewConversation(Plain, lookup)
		if err != nil {
			t.Fatal(err)
		}
		_, done, err := conv.Step([]byte("\x00" + tc.user + "\x00" + tc.password))
		if done != tc.ok || (err == nil) != tc.ok || (tc.ok && conv.User() != tc.user) {
			t.Errorf("PLAIN %s/%s: done %v, err %v, user %q; want ok=%v", tc.user, tc.password, done, err, conv.User(), tc.ok)
		}
		if lookups != 1 {
			t.Errorf("PLAIN %s/%s: %d reads of the user store, want 1", tc.user, tc.password, lookups)
		}
	}
}

// TestVerifyDerivationsBounded: PLAIN verifications from many connections
// at once (any client can start one before authenticating) derive at most
// cap(verifySlots) keys at a time, and each still gets its answer.
func TestVerifyDerivationsBounded(t *testing.T) {
	c, err := NewCredential(ScramSHA512, "secret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running, most := 0, 0
	deriveKey = func(h func() hash.Hash, password string, salt []byte, iter, n int) ([]byte, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // overlap the callers
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		return pbkdf2.Key(h, password, salt, iter, n)
	}
	t.Cleanup(func() { deriveKey = pbkdf2.Key[hash.Hash] })
	const callers = 16
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, want := c.Verify([]string{"secret", "wrong"}[i%2]), i%2 == 0; got != want {
				t.Errorf("caller %d: Verify %v, want %v", i, got, want)
			}
		}()
	}
	wg.Wait()
	if most > cap(verifySlots) {
		t.Fatalf("%d of %d concurrent PLAIN verifications derived at once, want at most %d", most, callers, cap(verifySlots))
	}
}
