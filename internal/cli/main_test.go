package cli

import (
	"os"
	"testing"
)

// TestMain lets the test binary be vllmstat itself in a second process: with
// VLLMSTAT_TEST_AS_CLI=1 it runs its arguments as vllmstat's.
func TestMain(m *testing.M) {
	if os.Getenv("VLLMSTAT_TEST_AS_CLI") == "1" {
		os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
