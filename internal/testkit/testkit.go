// Package testkit holds what the tests of many packages share: golden files and the -update
// flag that rewrites them, polling for a condition until a deadline, a file that fails like a
// full disk, and the shared fixtures (real and rendered vLLM pages, a real run's steps.jsonl)
// under its testdata folder.
//
// Only _test.go files import it. It imports nothing of this module, so that the tests of every
// package, those inside the package too, may use it without an import cycle.
//
// It registers the -update flag in every test binary that imports it: a package whose tests
// import testkit reads Update rather than defining a flag of its own.
package testkit
