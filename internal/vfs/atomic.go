package vfs

import (
	"fmt"
	"path"
	"strings"
)

// TempSuffix ends the name of the temporary file WriteFileAtomic builds. A
// file with this suffix is never live data: RemoveTemporaries deletes what a
// crash left.
const TempSuffix = ".tmp"

// WriteFileAtomic replaces dir/name with data so that after a crash the file
// holds either the old or the new content in full: it writes
// dir/name.tmp, syncs it, renames it over dir/name and syncs dir. It returns
// only when the new content is durable. Two writers of the same name must
// not run at once (they share the temporary name).
func WriteFileAtomic(fsys FS, dir, name string, data []byte) (err error) {
	tmp := path.Join(dir, name+TempSuffix)
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err = f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = fsys.RenameReplace(tmp, path.Join(dir, name)); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err = fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// RemoveTemporaries deletes the regular files in dir that are temporaries
// of WriteFileAtomic for one of names (name.tmp), and those of an older
// writer (.name.tmp-N), left there by a crash. Directories are never
// touched. It returns the names it removed.
func RemoveTemporaries(fsys FS, dir string, names ...string) ([]string, error) {
	entries, err := ListNames(fsys, dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !isTemporary(e, names) {
			continue
		}
		full := path.Join(dir, e)
		if st, err := fsys.Stat(full); err != nil || st.IsDir {
			continue
		}
		if err := fsys.Remove(full); err != nil && !IsNotExist(err) {
			return removed, fmt.Errorf("remove leftover %s: %w", full, err)
		}
		removed = append(removed, e)
	}
	if len(removed) > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

func isTemporary(entry string, names []string) bool {
	for _, n := range names {
		if entry == n+TempSuffix {
			return true
		}
		if rest, ok := strings.CutPrefix(entry, "."+n+TempSuffix+"-"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}
