// Command vllmstat turns a vLLM fleet's /metrics pages into exact per-training-step metrics.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	"github.com/vllmstat/vllmstat/internal/cli"
)

func main() {
	os.Exit(run())
}

// run runs the command. For measuring the scraper under a real fleet (see docs/performance.md),
// VLLMSTAT_CPUPROFILE=FILE writes a CPU profile of the whole run to FILE (from
// VLLMSTAT_CPUPROFILE_AFTER=DURATION on, when set: the steady state without the first pages'
// learning), and VLLMSTAT_MEMPROFILE=FILE a heap profile every 10 seconds (the steady state, not
// the exit's).
func run() int {
	if path := os.Getenv("VLLMSTAT_MEMPROFILE"); path != "" {
		go writeHeapProfiles(path)
	}
	if path := os.Getenv("VLLMSTAT_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_CPUPROFILE: %v\n", err)
			return 2
		}
		defer f.Close()
		defer pprof.StopCPUProfile() // after the timer below is stopped
		var after time.Duration
		if s := os.Getenv("VLLMSTAT_CPUPROFILE_AFTER"); s != "" {
			if after, err = time.ParseDuration(s); err != nil {
				fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_CPUPROFILE_AFTER: %v\n", err)
				return 2
			}
		}
		start := func() {
			if err := pprof.StartCPUProfile(f); err != nil {
				fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_CPUPROFILE: %v\n", err)
			}
		}
		if after > 0 {
			t := time.AfterFunc(after, start)
			defer t.Stop()
		} else {
			start()
		}
	}
	return cli.Run(os.Args[1:], os.Stdout, os.Stderr)
}

// writeHeapProfiles replaces path with a heap profile every 10 seconds.
func writeHeapProfiles(path string) {
	for range time.Tick(10 * time.Second) {
		tmp := path + ".tmp"
		f, err := os.Create(tmp)
		if err != nil {
			fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_MEMPROFILE: %v\n", err)
			return
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "vllmstat: VLLMSTAT_MEMPROFILE: %v\n", err)
			return
		}
	}
}
