// Package chaos holds the chaos scenarios: Go tests that start real sluice
// brokers, ZooKeeper, schedulers, workers and registries on their own
// loopback addresses (testdata/chaos/harness), drive a workload that records
// a history (testdata/chaos/workload) while nemeses kill, pause, partition
// and starve them on a seeded schedule, and check the history with
// internal/history. `make chaos` runs each for CHAOS_TIME; `make test` runs
// a short fixed-seed version of each. See the README's testing section.
package chaos
