package security

import (
	"errors"
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
