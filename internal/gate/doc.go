// Package gate holds the tests of the rules scripts/test relies on to run the test suite in
// less time: the packages it tests without the race detector (scripts/sequential) start no
// goroutines but in tests it runs under -race. It also tests scripts/fuzz, which fuzzes what
// the test suite only replays: that each target really fuzzes.
package gate
