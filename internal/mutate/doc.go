// Package mutate turns off one safety mechanism at a time, for the
// mutation tests that show the fault harness's checker catches its loss.
//
// Each guarded mechanism has one line at the place it acts:
//
//	if mutate.Enabled(mutate.ExclusiveManifest) { ... the unsafe way ... }
//
// In a normal build Enabled is a constant false, so the compiler removes
// the branch and no production binary can be switched. Built with
// `-tags sluice_mutation`, Enabled reads SLUICE_MUTATE (a comma-separated
// list of names) at every call, so a test switches with t.Setenv and a
// child process started by the test inherits the switch:
//
//	SLUICE_MUTATE=writers.exclusive-manifest go test -tags 'duckdb_arrow sluice_mutation' ./testdata/chaos/workload/
//
// The names (constants below) and what each disables:
//
//	writers.exclusive-manifest  the commit writes the split's manifest with a
//	                            plain replacing write (vfs.WriteFileAtomic)
//	                            instead of creating it exclusively
//	writers.chain               the chain rule: a split may start anywhere
//	writers.lease               recovery takes every attempt for dead, live
//	                            or not (its lease is not consulted)
//	broker.idempotent-sequence  the broker appends an idempotent producer's
//	                            duplicate or out-of-order batch as new
package mutate

// EnvVar names the environment variable that lists the mutations on.
const EnvVar = "SLUICE_MUTATE"

// The mutations.
const (
	ExclusiveManifest  = "writers.exclusive-manifest"
	Chain              = "writers.chain"
	Lease              = "writers.lease"
	IdempotentSequence = "broker.idempotent-sequence"
)

// Names lists every mutation.
var Names = []string{ExclusiveManifest, Chain, Lease, IdempotentSequence}
