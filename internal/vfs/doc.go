// Package vfs is sluice's one file-system interface: the broker's log and
// the writers' commit protocol do all their I/O through FS, so that tests
// can run them on an in-memory disk that loses power (Mem.Crash) and on a
// wrapper that fails any chosen operation (Faulty, driven by
// internal/faults).
//
//	broker/log, broker/group,        writers, jobs, scheduler:
//	broker/metadata, broker/server   writers/filesystem.Open(uri)
//	         │                                │
//	         │                      Durable(Sub(base, root))
//	         ▼                                ▼
//	┌──────────────────── FS (this package) ────────────────────┐
//	│ OS{}          Mem (Crash)     Faulty{FS, faults.Injector}  │
//	│ internal/vfs/hdfs (colinmarc/hdfs/v2)                      │
//	└────────────────────────────────────────────────────────────┘
//	internal/vfs/vfstest: one conformance suite run against OS, Mem
//	(with Crash), Durable, Faulty and HDFS (on a real MiniDFSCluster)
//
// # Guarantees of FS (the contract; vfstest checks each)
//
// Durability is explicit: nothing is durable until a Sync says so.
//
//   - Create opens name for reading and writing, truncating an existing file.
//     Not atomic: a crash may leave the old content, an empty file or part of
//     the new one.
//   - CreateExclusive creates a new file and fails with an error wrapping
//     ErrExist when name exists. The check and the creation are one atomic
//     step on every implementation (O_CREAT|O_EXCL; HDFS create with
//     overwrite=false): of several racing creators exactly one wins. This is
//     the one exclusive step HDFS can promise, so every exclusive commit is
//     built on it (or on WriteExclusive).
//   - WriteExclusive publishes a small file: it fails with ErrExist when name
//     exists, as CreateExclusive does, and when it returns nil the file and
//     its directory entry are durable. On the OS and Mem a reader never sees
//     it half written (a synced temporary linked into place). On HDFS it is
//     CreateExclusive, one write and Close: a reader may see the file empty
//     or partial while (or if) its writer is still writing, so callers protect
//     the content with a checksum (the commit manifest does).
//   - File.Sync makes the file's data durable. Close releases the handle and
//     makes nothing durable. HDFS is the other way round: Sync only sends the
//     data down the DataNode pipeline, and Close makes it durable (it waits
//     for every DataNode of the pipeline and completes the file on the
//     NameNode); vfs.Durable's Close, which does both, is durable on each.
//     Reads of an open file keep working after its name was removed (not on
//     HDFS, whose blocks go with the name).
//   - SyncDir makes a directory's entries (creations, renames, removals in
//     it) durable. A new directory is durable in its parent only after
//     SyncDir of the parent; an entry survives a crash only if every
//     directory above it does. On HDFS it does nothing: the NameNode's edit
//     log makes every namespace change durable when it returns.
//   - RenameReplace renames oldname to newname, atomically replacing
//     newname if it exists (rename(2); HDFS rename with overwrite, atomic on
//     the NameNode). A directory moves only to a name that does not exist.
//     Durable after SyncDir of both parents.
//   - RenameNoReplace renames oldname to newname and never replaces: it
//     fails with ErrExist when newname exists, leaving both as they were. A
//     crash in the middle leaves the old name, the new name or both, never
//     neither; when it returns nil the new name is durable (the old name's
//     removal needs SyncDir of its parent). On Linux it is one
//     renameat2(2) with RENAME_NOREPLACE, atomic and exclusive for files
//     and directories: of several racing movers onto one name exactly one
//     wins. Where the kernel or the file system lacks it, a file moves by
//     link(2) (atomic and exclusive), fsync of the new directory, unlink,
//     and a directory by a checked rename(2). If newname is already the
//     very same file (a link move interrupted between link and unlink) it
//     finishes the move and succeeds. On HDFS, whose rename overwrites, it is
//     check-then-rename: exclusive only when, as in the writers' commit
//     protocol, no one else can create newname; a caller that races others
//     for a name must use CreateExclusive or WriteExclusive instead.
//   - Remove deletes a file or an empty directory (ErrNotExist if missing);
//     RemoveAll deletes a tree (a missing path is no error).
//   - MkdirAll creates a directory and its missing parents; an existing one
//     is fine.
//   - List returns the entries of one directory sorted by name; Stat
//     describes one path. A missing path gives an error wrapping
//     ErrNotExist.
//   - An operation an implementation cannot do (random writes, Truncate or
//     OpenReadWrite on HDFS, whose files are append-only) fails with an
//     error wrapping ErrUnsupported.
//
// Errors are classified with errors.Is: ErrExist, ErrNotExist, ErrBadPath,
// ErrUnsupported, ErrCrashed, and internal/faults.ErrInjected.
//
// # Layers
//
// Sub confines an FS to one directory: names are slash-separated and
// relative to it, and a name that climbs above it is refused (ErrBadPath).
// Durable makes each step of the writers' commit protocol durable when it
// returns, so their code never calls Sync: a file's Close syncs the file and
// its directory, MkdirAll syncs each directory it creates into its parent,
// RenameNoReplace syncs both directories. Removals are not synced (the
// commit protocol never depends on a removal surviving a crash).
//
//	fs := vfs.Durable(vfs.Sub(vfs.OS{}, "/var/warehouse/pageviews"))
//	err := fs.WriteExclusive("_sluice/commits/pv/0/00000000000000000000.json", manifest)
//
// Tests stack Faulty on Mem to cut the power at any operation:
//
//	mem := vfs.NewMem()
//	fs := vfs.NewFaulty(vfs.Durable(mem), faults.OnIndex(7)) // the 8th operation fails
//	... run the workload, then mem.Crash() and reopen ...
package vfs
