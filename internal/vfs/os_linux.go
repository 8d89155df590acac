package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace is renameat2(RENAME_NOREPLACE): the kernel refuses, in
// the same step as the rename, a newname that exists. A kernel without the
// call (ENOSYS) or a file system without the flag (EINVAL) gives
// errNoRenameNoReplace, and the caller falls back; a rename EINVAL refuses
// for another reason (a directory into itself) fails the fallback the same
// way.
func renameNoReplace(oldname, newname string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldname, unix.AT_FDCWD, newname, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP):
		return errNoRenameNoReplace
	}
	return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
}
