package cli

import (
	"fmt"
	"io"
)

func runSim(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "vllmstat sim: not built yet")
	return exitError
}
