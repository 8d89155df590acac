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
//	writers.fate                an attempt's commit intent is written over its
//	                            fate file (vfs.WriteFileAtomic) instead of
//	                            created exclusively, so it replaces recovery's
//	                            reaped mark and commits files recovery deletes
//	writers.lease               the attempt's lease (a worker's hold on the
//	                            split it loads): recovery counts every lease
//	                            as expired and reaps live attempts
//	broker.idempotent-sequence  the broker appends an idempotent producer's
//	                            duplicate or out-of-order batch as new
//	mirror.position-outside-txn the mirror commits the copied records before
//	                            it writes their position, in a transaction of
//	                            its own (internal/mirror's
//	                            TestMutationMirrorPositionOutsideTxn)
//
// Each has a test in testdata/chaos/workload (TestMutation*) where the
// checker reports an anomaly with it on and none with it off. Without the
// lease the fate file still decides between an attempt and recovery (a
// reaped attempt's commit is refused, ErrAttemptExpired), so nothing is
// loaded twice or lost from a committed range: what is lost is progress,
// which the checker judges through a load-read's Want (load-incomplete:
// an acknowledged record the loads were waited for and never committed).
//
// Fault hooks that a test arms in a broker process it starts are behind
// the same tag (Built): broker/server's CrashAfterMarkersEnv (the process
// kills itself before its n+1th transaction marker) is read only by a
// tagged binary (testdata/harness/kafka's MutationSluiceBinary builds one).
package mutate

// EnvVar names the environment variable that lists the mutations on.
const EnvVar = "SLUICE_MUTATE"

// The mutations.
const (
	ExclusiveManifest  = "writers.exclusive-manifest"
	Chain              = "writers.chain"
	Fate               = "writers.fate"
	Lease              = "writers.lease"
	IdempotentSequence = "broker.idempotent-sequence"
	MirrorPosition     = "mirror.position-outside-txn"
)

// Names lists every mutation.
var Names = []string{ExclusiveManifest, Chain, Fate, Lease, IdempotentSequence, MirrorPosition}
