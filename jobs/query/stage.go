package query

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

// Cache is a bounded local copy of remote (HDFS) data files, so that
// DuckDB's readers can read them. Layout:
//
//	<dir>/files/<key>/<k=v>/…/<file name>    one entry per remote file
//	<dir>/tmp/                               copies being made
//
// The key is a hash of the file system, the path, the size and the
// modification time, so a changed file is fetched again. An entry's
// directory modification time is its last use; when the cache holds more
// than its limit, the least recently used entries not needed by the
// running query are removed. Copies are written under tmp/ and renamed
// into place, so a reader never sees a partial entry.
type Cache struct {
	dir   string
	limit int64
	clock clock.Clock
}

// NewCache returns the cache in dir holding at most limit bytes.
func NewCache(dir string, limit int64) (*Cache, error) {
	for _, d := range []string{filepath.Join(dir, "files"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("query: local cache: %w", err)
		}
	}
	return &Cache{dir: dir, limit: limit, clock: clock.Real{}}, nil
}

// DefaultCacheDir is the cache directory when none is given.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "sluice", "query")
}

func cacheKey(fsName, name string, info vfs.FileInfo) string {
	h := sha256.Sum256([]byte(fsName + "\x00" + name + "\x00" + strconv.FormatInt(info.Size, 10) +
		"\x00" + strconv.FormatInt(info.ModTime.UnixNano(), 10)))
	return hex.EncodeToString(h[:16])
}

// Stage returns a local path holding the remote file name (of fs, with
// the given listing entry), copying it when the cache has no entry. rel is
// the path under the entry (it keeps the Hive directories of the file).
// staged reports whether a copy was made.
func (c *Cache) Stage(fs vfs.FS, name, rel string, info vfs.FileInfo) (local string, staged bool, err error) {
	return c.put(cacheKey(fs.String(), name, info), rel, func(dst string) error {
		return copyFrom(fs, name, dst, info.Size)
	})
}

// Derive is Stage for a file made from the remote one by convert (which
// writes dst), keyed by the source and a kind naming the conversion.
func (c *Cache) Derive(fs vfs.FS, name, kind, rel string, info vfs.FileInfo, convert func(dst string) error) (string, bool, error) {
	return c.put(cacheKey(fs.String(), name+"\x00"+kind, info), rel, convert)
}

func (c *Cache) put(key, rel string, produce func(dst string) error) (string, bool, error) {
	entry := filepath.Join(c.dir, "files", key)
	local := filepath.Join(entry, filepath.FromSlash(rel))
	if _, err := os.Stat(local); err == nil {
		now := c.clock.Now()
		os.Chtimes(entry, now, now)
		return local, false, nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(c.dir, "tmp"), key+"-")
	if err != nil {
		return "", false, fmt.Errorf("query: local cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", false, fmt.Errorf("query: local cache: %w", err)
	}
	if err := produce(dst); err != nil {
		return "", false, err
	}
	if err := os.Rename(tmp, entry); err != nil {
		if _, serr := os.Stat(local); serr == nil {
			return local, false, nil // another process made it meanwhile
		}
		return "", false, fmt.Errorf("query: local cache: %w", err)
	}
	return local, true, nil
}

func copyFrom(fs vfs.FS, name, dst string, size int64) error {
	r, err := fs.Open(name)
	if err != nil {
		return fmt.Errorf("%w: opening %s/%s: %v", ErrData, fs.String(), name, err)
	}
	defer r.Close()
	f, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("query: local cache: %w", err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: copying %s/%s: %v", ErrData, fs.String(), name, err)
	}
	if n != size {
		return fmt.Errorf("%w: %s/%s: read %d bytes, listed %d (the file changed while read)", ErrData, fs.String(), name, n, size)
	}
	return nil
}

// Trim removes least recently used entries until the cache holds at most
// its limit, keeping the entries of keep (local paths in use).
func (c *Cache) Trim(keep []string) error {
	root := filepath.Join(c.dir, "files")
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("query: local cache: %w", err)
	}
	kept := map[string]bool{}
	for _, k := range keep {
		rel, err := filepath.Rel(root, k)
		if err == nil {
			first, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			kept[first] = true
		}
	}
	type entry struct {
		name string
		used time.Time
		size int64
	}
	var all []entry
	var total int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		var size int64
		filepath.WalkDir(filepath.Join(root, e.Name()), func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					size += fi.Size()
				}
			}
			return nil
		})
		all = append(all, entry{e.Name(), info.ModTime(), size})
		total += size
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	var errs []error
	for _, e := range all {
		if total <= c.limit {
			break
		}
		if kept[e.name] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, e.name)); err != nil {
			errs = append(errs, err)
			continue
		}
		total -= e.size
	}
	return errors.Join(errs...)
}
