package filesystem

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/sluicehq/sluice/internal/vfs"
)

// ErrBadURI reports an output URI that names no supported file system.
var ErrBadURI = errors.New("filesystem: bad URI")

// Open returns the FS named by an output URI:
//
//	file:///abs/dir          a local directory (created if needed)
//	/abs/dir or rel/dir      the same, without a scheme
//	hdfs://host:port/path    an HDFS directory (created if needed)
//	hdfs:///path             NameNodes from HADOOP_CONF_DIR
func Open(uri string) (vfs.FS, error) { return OpenWith(uri, HDFSOptions{}) }

// OpenWith is Open with the options of an hdfs:// URI (its Kerberos
// login: a job's output.kerberos).
func OpenWith(uri string, hopts HDFSOptions) (vfs.FS, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadURI, uri, err)
	}
	switch u.Scheme {
	case "":
		return local(NewLocal(filepath.FromSlash(uri)))
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q: a file URI has no host (file:///abs/path)", ErrBadURI, uri)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("%w: %q: no path", ErrBadURI, uri)
		}
		return local(NewLocal(filepath.FromSlash(u.Path)))
	case "hdfs":
		h, err := NewHDFS(u.Host, u.Path, hopts)
		if err != nil {
			return nil, err
		}
		return h, nil
	default:
		return nil, fmt.Errorf("%w: %q: scheme %q is not file or hdfs", ErrBadURI, uri, u.Scheme)
	}
}

// local keeps a nil *Local out of a non-nil interface.
func local(l *Local, err error) (vfs.FS, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
