package cli

import (
	"fmt"
	"io"

	"github.com/vllmstat/vllmstat/internal/version"
)

// runVersion is `vllmstat version` and `vllmstat --version`: the release number, the commit
// the binary was built from and the Go toolchain, on one line.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "vllmstat version: takes no arguments, got %q\n", args)
		return exitUsage
	}
	fmt.Fprintln(stdout, version.Current())
	return exitOK
}
