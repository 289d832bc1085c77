package scrape

import "testing"

// TestVersionAskedAgainAfterFailure: a target known to report no version (no endpoint) is not
// asked while it answers, but once a scrape of its page fails it may come back as another
// server (restarted with VLLM_SERVER_DEV_MODE=1, or another on its port): the next page asks
// again, on both transports, and reads the version it now reports.
func TestVersionAskedAgainAfterFailure(t *testing.T) {
	versionScrapers(t, runningPage, map[string]answer{}, func(t *testing.T, e *engineServer, read func() *VersionReading) {
		if r := read(); r == nil || r.Err != nil || r.Reports {
			t.Fatalf("first reading %+v, want one that reports none", r)
		}
		if r := read(); r != nil {
			t.Fatalf("reading %+v of a target known to report none", r)
		}
		e.set(func(e *engineServer) { e.page = "" }) // down
		if r := read(); r.Err == nil {
			t.Fatal("the page's failure was read as a version")
		}
		e.set(func(e *engineServer) {
			e.page = runningPage
			e.answers["/weight_info"] = answer{200, `{"weight_version": "9"}`}
		})
		if r := read(); r == nil || r.Err != nil || !r.Reports || r.Version != 9 {
			t.Fatalf("reading %+v after the target came back with the endpoint, want version 9", r)
		}
		if n := e.count("/weight_info"); n != 2 {
			t.Fatalf("/weight_info asked %d times, want once before the failure and once after", n)
		}
	})
}
