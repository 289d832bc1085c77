// Command vllmstat turns a vLLM fleet's /metrics pages into exact per-training-step metrics.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/vllmstat/vllmstat/internal/cli"
)

func main() {
	os.Exit(run())
}

// run runs the command. VLLMSTAT_CPUPROFILE=FILE writes a CPU profile of the whole run to FILE,
// for measuring the scraper under a real fleet (see docs/performance.md).
func run() int {
	if path := os.Getenv("VLLMSTAT_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_CPUPROFILE: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_CPUPROFILE: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	return cli.Run(os.Args[1:], os.Stdout, os.Stderr)
}
