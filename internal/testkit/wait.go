package testkit

import (
	"testing"
	"time"
)

// maxPoll bounds the wait between two looks at a condition: the waits start at a millisecond
// and double, so that a condition that holds at once is seen at once and one that takes seconds
// (a query to a real Prometheus) is not asked hundreds of times.
const maxPoll = 50 * time.Millisecond

// WaitFor polls cond until it holds. The timeout is there only to catch a hang: past it, the
// test fails, saying what it waited for (what, e.g. "the port to come back").
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// Poll polls cond until it holds or timeout passes, and reports whether it held; cond is asked
// once more when the timeout has passed. It is for callers that report more than WaitFor does
// when cond did not hold (a log, the state they saw), or that go on either way.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; ; wait = min(2*wait, maxPoll) {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(wait, time.Until(deadline)))
	}
}
