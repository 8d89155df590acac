package filesystem

import (
	"fmt"
	"net/url"
	"path/filepath"
)

// Open returns the FS named by an output URI:
//
//	file:///abs/dir          a local directory (created if needed)
//	/abs/dir or rel/dir      the same, without a scheme
//	hdfs://host:port/path    an HDFS directory (created if needed)
//	hdfs:///path             NameNodes from HADOOP_CONF_DIR
func Open(uri string) (FS, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadURI, uri, err)
	}
	switch u.Scheme {
	case "":
		return NewLocal(filepath.FromSlash(uri))
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("%w: %q: a file URI has no host (file:///abs/path)", ErrBadURI, uri)
		}
		if u.Path == "" {
			return nil, fmt.Errorf("%w: %q: no path", ErrBadURI, uri)
		}
		return NewLocal(filepath.FromSlash(u.Path))
	case "hdfs":
		return NewHDFS(u.Host, u.Path, HDFSOptions{})
	default:
		return nil, fmt.Errorf("%w: %q: scheme %q is not file or hdfs", ErrBadURI, uri, u.Scheme)
	}
}
