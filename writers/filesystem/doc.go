// Package filesystem opens the storage the writers write to: an output URI
// becomes an internal/vfs.FS confined to the URI's directory, with every
// step of the commit protocol durable when it returns
// (vfs.Durable(vfs.Sub(base, dir))).
//
//	output URI  file:///var/warehouse/pageviews   hdfs://127.0.0.1:9000/warehouse/pv
//	               │                                    │
//	               ▼                                    ▼
//	          Local: vfs.OS{}                      HDFS: internal/vfs/hdfs
//	               └──────────────┬────────────────────┘
//	                              ▼
//	               vfs.Durable(vfs.Sub(base, dir))   the writers' vfs.FS
//	                              ▲
//	          vfs.NewFaulty(…)  vfs.Durable(vfs.NewMem()) + Mem.Crash()  (tests)
//
// Every name handed to these file systems is slash-separated and relative
// to the URI's directory; a name that climbs above it is refused
// (vfs.ErrBadPath). The guarantees are internal/vfs's: the writers rely on
// CreateExclusive and WriteExclusive being exclusive (the commit), on a
// file's Close making it durable (vfs.Durable), and on RenameNoReplace
// never replacing a file (on HDFS: as long as nobody else creates the
// destination, which the commit protocol ensures for its final paths).
//
// NewLocalNoSync gives a local directory without fsync, for tests and
// scratch output.
package filesystem
