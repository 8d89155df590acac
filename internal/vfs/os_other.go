//go:build !linux

package vfs

// renameNoReplace has no atomic system call to use here: the caller falls
// back to link(2) and a checked rename(2).
func renameNoReplace(string, string) error { return errNoRenameNoReplace }
