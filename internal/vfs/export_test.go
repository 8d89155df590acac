package vfs

// OSByLink is the OS whose RenameNoReplace takes the fallback of systems
// without renameat2 (link(2), or a checked rename(2) for a directory).
var OSByLink = OS{byLink: true}
