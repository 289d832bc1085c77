package cli

import (
	"flag"
	"os"
	"testing"
)

// parallelTests is how many of the package's parallel tests run at once, unless -test.parallel
// says: they are end-to-end runs that partly wait on simulated engines (their sleeps, wakes and
// loads, on the wall clock). Two at a time (GOMAXPROCS on 2 cores) left the package the gate's
// last 185 s of wall time for 179 s of CPU, one core idle; four at a time, about 100 s. Each
// test's timing margins hold at six at a time beside two busy cores.
const parallelTests = "4"

// TestMain lets the test binary be vllmstat itself in a second process: with
// VLLMSTAT_TEST_AS_CLI=1 it runs its arguments as vllmstat's.
func TestMain(m *testing.M) {
	if os.Getenv("VLLMSTAT_TEST_AS_CLI") == "1" {
		os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", parallelTests)
	}
	os.Exit(m.Run())
}
