package mutate

import "testing"

// Without the sluice_mutation tag nothing can be switched on; with it, the
// names listed in SLUICE_MUTATE are.
func TestMutationSwitch(t *testing.T) {
	t.Setenv(EnvVar, ExclusiveManifest+", "+Fate)
	for _, n := range Names {
		want := Built && (n == ExclusiveManifest || n == Fate)
		if got := Enabled(n); got != want {
			t.Fatalf("Enabled(%q) = %v with %s=%q (built with the tag: %v)", n, got, EnvVar, ExclusiveManifest+", "+Fate, Built)
		}
	}
}
