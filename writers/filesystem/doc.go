// Package filesystem is the one door through which sluice's writers touch
// storage: a small FS interface with a local implementation (file://), an HDFS
// implementation (hdfs://host:port/path, github.com/colinmarc/hdfs/v2) and an
// error-injecting wrapper for fault tests that wraps either of them.
//
// Every path handed to an FS is slash-separated and relative to the FS's root
// (the path part of the output URI); the FS never lets a path climb above it.
//
//	output URI  file:///var/warehouse/pageviews   hdfs://127.0.0.1:9000/warehouse/pv
//	               │                                    │
//	               ▼                                    ▼
//	          Local{root}                          HDFS{client, root}
//	               └──────────────┬────────────────────┘
//	                              ▼
//	                    FS interface (this file's contract)
//	                              ▲
//	                   Faulty{inner FS, fail op i}   (tests only)
//	                   Mem{live, durable}.Crash()    (tests only: power loss)
//
// # Guarantees (the contract every implementation meets)
//
//   - Create is exclusive: it fails with an error wrapping ErrExist when the
//     path exists. It does not create parent directories.
//   - A File's Close makes the data durable before it returns nil: the local
//     FS fsyncs the file and its directory; HDFS completes the file on the
//     NameNode (every DataNode of the pipeline acknowledged), retrying while
//     the NameNode reports that the last block is still replicating
//     (bounded by HDFSOptions.CloseTimeout). An empty file (nothing or only
//     zero-length writes) has no block and closes at once.
//     A file whose Close did not return nil may be empty, partial or complete.
//   - WriteExclusive(path, data) publishes a small file in one step and fails
//     with ErrExist when the path exists. Locally a reader never sees it half
//     written (temp file, fsync, link, fsync dir). On HDFS the file is created
//     with overwrite=false and written in one call: a reader may see it empty
//     or partial while (or if) its writer is still writing, so callers protect
//     the content with a checksum (the commit manifest does).
//   - Rename never replaces: it fails with ErrExist when the destination
//     exists. Locally a file moves by link (atomic, fails if the destination
//     exists) then unlink, with the directories fsynced; a crash in between
//     leaves both names, which the commit protocol's roll-forward handles.
//     Directories move by a checked rename. A Rename whose destination
//     is already the very same file (a move interrupted between link and
//     unlink) finishes the move and succeeds. On HDFS, whose rename
//     overwrites, it is check-then-rename: exclusive only when, as in the
//     commit protocol, no one else can create the destination. It creates
//     no parent directories.
//   - Remove deletes a file or an empty directory; RemoveAll a tree. Both
//     treat a missing path as success.
//   - MkdirAll creates a directory and its parents; an existing one is fine.
//     Locally each directory it creates is fsynced into its parent, so it
//     survives a power loss (on HDFS the NameNode's edit log does that).
//   - List returns the entries of one directory sorted by name; Stat one path.
//     A missing path gives an error wrapping ErrNotExist.
//
// NewLocalNoSync gives a local FS without fsync, for tests and scratch output.
//
// Mem is an in-memory FS that models what Local makes durable call for call
// (a closed file and its directory listing, a new directory in its parent,
// both directories of a move; never a removal); Mem.Crash simulates a
// power loss by keeping only that. Tests stack Faulty on Mem to cut the
// power at any operation.
//
// Errors are wrapped with the operation and path and classified with
// errors.Is(err, ErrExist / ErrNotExist / ErrInjected).
package filesystem
