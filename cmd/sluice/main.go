// Command sluice is the single binary of the sluice project: the broker, the
// loader, the scheduler and the command-line kafka. This package only parses
// flags and wires packages together.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
