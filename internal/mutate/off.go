//go:build !sluice_mutation

package mutate

// Built reports whether this binary can be mutated (built with the
// sluice_mutation tag).
const Built = false

// Enabled reports whether the named mutation is on: never, in a build
// without the sluice_mutation tag.
func Enabled(name string) bool { return false }
