//go:build !unix

package server

// lockDataDir is a no-op where flock(2) is not available.
func lockDataDir(string) (func(), error) { return func() {}, nil }
