package kdc

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the KDC exit when the test binary does (even when it
// is killed), so no krb5kdc outlives its tests.
func dieWithParent(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
