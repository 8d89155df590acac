//go:build race

package jobs_test

// raceEnabled: build helper binaries with -race too (it shares the build cache with the tests).
const raceEnabled = true
