//go:build sluice_mutation

package mutate

import (
	"os"
	"strings"
)

// Built reports whether this binary can be mutated (built with the
// sluice_mutation tag).
const Built = true

// Enabled reports whether the named mutation is listed in SLUICE_MUTATE.
// It reads the variable at every call, so a test switches a mutation with
// t.Setenv and a child process inherits it.
func Enabled(name string) bool {
	for _, n := range strings.Split(os.Getenv(EnvVar), ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}
