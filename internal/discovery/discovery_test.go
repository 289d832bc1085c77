package discovery

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/discovery/dnstest"
	"github.com/vllmstat/vllmstat/internal/target"
)

// chanSetter passes every SetSourceTargets call to the test.
type chanSetter chan update

func (c chanSetter) SetSourceTargets(ctx context.Context, source string, ts []target.Target) error {
	select {
	case c <- update{source, ts}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func next(t *testing.T, c chanSetter) update {
	t.Helper()
	select {
	case u := <-c:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update in 10s")
		return update{}
	}
}

// TestManagerRun runs a Manager on a fake clock: both sources give their targets at once, a
// DNS change arrives at the next refresh, a file change at the file interval (5 s, shorter
// than the 30 s refresh), each with its removals one refresh later, and Run returns when its
// context ends.
func TestManagerRun(t *testing.T) {
	srv := dnstest.New(t)
	srv.SetIPs("fleet.vllmstat.test", "10.0.0.1")
	dir := t.TempDir()
	file := filepath.Join(dir, "f.json")
	writeFile(t, file, `[{"targets": ["h:1"], "labels": {"team": "a"}}]`)
	d, err := ParseDNS("dns+http://fleet.vllmstat.test.:8000")
	if err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	set := make(chanSetter)
	m := New(Options{DNS: []DNSName{d}, Files: []string{filepath.Join(dir, "*.json")}, Resolver: NewResolver(srv.Addr), Clock: fc}, set)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	got := map[string]string{}
	for range 2 {
		u := next(t, set)
		got[u.source] = urls(u.targets)
	}
	if got["dns:dns+http://fleet.vllmstat.test.:8000/metrics"] != "http://10.0.0.1:8000/metrics" || got[FileSource(file)] != "http://h:1/metrics" {
		t.Fatalf("first updates %v", got)
	}
	srv.SetIPs("fleet.vllmstat.test", "10.0.0.2")
	writeFile(t, file, `[{"targets": ["h:2"]}]`)
	fc.Advance(5 * time.Second)
	if u := next(t, set); u.source != FileSource(file) || urls(u.targets) != "http://h:2/metrics http://h:1/metrics" {
		t.Fatalf("after 5 s: %s %s, want the file's addition", u.source, urls(u.targets))
	}
	fc.Advance(5 * time.Second)
	if u := next(t, set); u.source != FileSource(file) || urls(u.targets) != "http://h:2/metrics" {
		t.Fatalf("after 10 s: %s %s, want the file's removal", u.source, urls(u.targets))
	}
	fc.Advance(20 * time.Second)
	// The file is re-read meanwhile, unchanged: no update of it comes first.
	if u := next(t, set); u.source == FileSource(file) || urls(u.targets) != "http://10.0.0.1:8000/metrics http://10.0.0.2:8000/metrics" {
		t.Fatalf("after 30 s: %s %s, want the DNS addition", u.source, urls(u.targets))
	}
	fc.Advance(30 * time.Second)
	if u := next(t, set); u.source == FileSource(file) || urls(u.targets) != "http://10.0.0.2:8000/metrics" {
		t.Fatalf("after 60 s: %s %s, want the DNS removal", u.source, urls(u.targets))
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
