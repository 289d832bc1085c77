package discovery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

func TestParseFile(t *testing.T) {
	tests := []struct {
		name, file, in string
		want           string // URL{labels} ...
		errHas         string
	}{
		{name: "json", file: "a.json",
			in:   `[{"targets": ["10.0.0.1:8000", "https://h:9/x"], "labels": {"team": "a", "__meta_x": "y", "empty": ""}}, {"targets": ["10.0.0.2:8000"]}]`,
			want: "http://10.0.0.1:8000/metrics{team=a} https://h:9/x{team=a} http://10.0.0.2:8000/metrics{}"},
		{name: "yaml", file: "a.YML", in: "- targets: [\"h:1\"]\n  labels: {__scheme__: https, __metrics_path__: /m, zone: z}\n",
			want: "https://h:1/m{zone=z}"},
		{name: "duplicate keeps the first group's labels", file: "a.yaml", in: "- {targets: [\"h:1\"], labels: {g: \"1\"}}\n- {targets: [\"http://h:1/metrics\"], labels: {g: \"2\"}}\n",
			want: "http://h:1/metrics{g=1}"},
		{name: "no targets", file: "a.json", in: "[]", want: ""},
		{name: "empty file", file: "a.yaml", in: "  \n", errHas: "file is empty"},
		{name: "bad json", file: "a.json", in: `[{"targets": ["h:1"]`, errHas: "not a JSON list"},
		{name: "unknown key", file: "a.json", in: `[{"targets": ["h:1"], "lables": {}}]`, errHas: `unknown field "lables"`},
		{name: "unknown yaml key", file: "a.yaml", in: "- targets: [\"h:1\"]\n  lables: {}\n", errHas: "lables"},
		{name: "trailing json", file: "a.json", in: `[] []`, errHas: "more after the list"},
		{name: "extension", file: "a.txt", in: `[]`, errHas: `extension ".txt"`},
		{name: "bad label name", file: "a.json", in: `[{"targets": ["h:1"], "labels": {"1x": "a"}}]`, errHas: `group 0: label "1x"`},
		{name: "bad scheme", file: "a.json", in: `[{"targets": ["h:1"], "labels": {"__scheme__": "ftp"}}]`, errHas: "not http or https"},
		{name: "bad target", file: "a.json", in: `[{"targets": ["h:1"]}, {"targets": ["ok:1", "u:s3cret@nohost"]}]`, errHas: `group 1: targets[1]: "<secret>@nohost"`},
		{name: "host without port", file: "a.json", in: `[{"targets": ["h"]}]`, want: "http://h/metrics{}"},
		{name: "path in host:port", file: "a.json", in: `[{"targets": ["h:1/x"]}]`, errHas: "want host:port or a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := ParseFile(tt.file, []byte(tt.in))
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("err %v, want one with %q and no secret", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tg := range ts {
				var ls []string
				for k, v := range tg.Labels {
					ls = append(ls, k+"="+v)
				}
				got = append(got, tg.URL+"{"+strings.Join(ls, ",")+"}")
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Fatalf("got  %s\nwant %s", g, tt.want)
			}
		})
	}
}

// TestFileRewrittenInPlace reads a file_sd file while it is rewritten in place: truncated (an
// empty file is an error), half written (a shorter list that parses), then whole again. Its
// targets stay throughout; only a shorter list read twice in a row removes what it lacks, and
// a new target is added at the first read that lists it.
func TestFileRewrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	log, _ := newLog()
	set := newFileSet([]string{filepath.Join(dir, "*.yaml")}, log)
	path := filepath.Join(dir, "fleet.yaml")
	refresh := func() string {
		var out []string
		for _, u := range set.refresh(context.Background()) {
			out = append(out, urls(u.targets))
		}
		return strings.Join(out, "; ")
	}
	write := func(content string) { // in place, as an editor without a rename writes
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	whole := "- targets:\n    - h:1\n    - h:2\n    - h:3\n"
	half := "- targets:\n    - h:1\n"
	write(whole)
	for _, step := range []struct{ content, want string }{
		{whole, "http://h:1/metrics http://h:2/metrics http://h:3/metrics"},
		{"", ""},
		{half, ""},
		{whole, ""},
		{half, ""},
		{half, "http://h:1/metrics"},
		{"- targets:\n    - h:1\n    - h:4\n", "http://h:1/metrics http://h:4/metrics"},
	} {
		write(step.content)
		if got := refresh(); got != step.want {
			t.Fatalf("after writing %q: updates %q, want %q", step.content, got, step.want)
		}
	}
}

// TestFileSDNotRegular: a FIFO matched by a pattern is not opened (that would block until a
// writer comes): it is logged once as not a regular file, and the other files are read.
func TestFileSDNotRegular(t *testing.T) {
	dir := t.TempDir()
	log, lb := newLog()
	set := newFileSet([]string{filepath.Join(dir, "*.json")}, log)
	fifo := filepath.Join(dir, "a.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("SKIPPED: cannot make a FIFO here: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "c.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "b.json"), `[{"targets": ["h:1"]}]`)
	for i := range 3 {
		ups := set.refresh(context.Background())
		if i == 0 && (len(ups) != 1 || urls(ups[0].targets) != "http://h:1/metrics") {
			t.Fatalf("updates %v, want b.json's target", ups)
		}
	}
	out := lb.String()
	if strings.Count(out, "a named pipe (FIFO): not a regular file") != 1 || !strings.Contains(out, "path="+fifo) ||
		strings.Count(out, "a directory: not a regular file") != 1 {
		t.Fatalf("want the FIFO and the directory logged once each, by path:\n%s", out)
	}
}

// TestFileSDReadBounded: a read that does not return within readTimeout (a file on a mount
// that stopped answering) is left behind and logged, the other files are read meanwhile, and
// the file is not read again until that read has returned.
func TestFileSDReadBounded(t *testing.T) {
	dir := t.TempDir()
	log, lb := newLog()
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	set := newFileSet([]string{filepath.Join(dir, "*.json")}, log)
	set.clock = fc
	stuck := filepath.Join(dir, "a.json")
	writeFile(t, stuck, `[{"targets": ["h:1"]}]`)
	writeFile(t, filepath.Join(dir, "b.json"), `[{"targets": ["h:2"]}]`)
	release := make(chan struct{})
	var reads atomic.Int64
	set.read = func(path string) ([]byte, error) {
		if path == stuck {
			reads.Add(1)
			<-release
		}
		return readFile(path)
	}
	refreshed := make(chan []update)
	go func() { refreshed <- set.refresh(context.Background()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The read's goroutine may not have run yet when refresh waits on the clock.
	testkit.WaitFor(t, 10*time.Second, "the read of a.json to start", func() bool { return reads.Load() == 1 })
	fc.Advance(readTimeout)
	ups := <-refreshed
	if len(ups) != 1 || urls(ups[0].targets) != "http://h:2/metrics" || !strings.Contains(lb.String(), "no answer from the file system within 5s") ||
		!strings.Contains(lb.String(), "path="+stuck) {
		t.Fatalf("updates %v, want b.json's only, and a.json's read logged as stuck:\n%s", ups, lb)
	}
	if ups := set.refresh(context.Background()); len(ups) != 0 || reads.Load() != 1 {
		t.Fatalf("updates %v, %d reads of a.json, while its read is stuck; want none, 1", ups, reads.Load())
	}
	close(release)
	testkit.WaitFor(t, 10*time.Second, "the stuck read to return", func() bool { return len(set.files[stuck].reading) == 1 })
	if ups := set.refresh(context.Background()); len(ups) != 1 || urls(ups[0].targets) != "http://h:1/metrics" {
		t.Fatalf("updates %v once the read returned, want a.json's", ups)
	}
}

// writeFile replaces path's content at once, as a careful writer does (rename), so that a
// refresh never sees half a file.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFileSetRefresh follows a glob of file_sd files through a run: a file's targets and
// labels, a rewrite of the same size, a broken file keeping its last good targets (logged once
// for the episode, its recovery once), a new file matching the glob, a file removed, and a
// pattern matching nothing, said once.
func TestFileSetRefresh(t *testing.T) {
	dir := t.TempDir()
	log, lb := newLog()
	set := newFileSet([]string{filepath.Join(dir, "*.json"), filepath.Join(dir, "missing.yaml")}, log)
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	refresh := func() map[string]string {
		out := map[string]string{}
		for _, u := range set.refresh(context.Background()) {
			var s []string
			for _, tg := range u.targets {
				s = append(s, tg.URL+"{team="+tg.Labels["team"]+"}")
			}
			out[strings.TrimPrefix(u.source, "file:"+dir+"/")] = strings.Join(s, " ")
		}
		return out
	}
	check := func(what string, got map[string]string, want map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: updates %v, want %v", what, got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("%s: updates %v, want %v", what, got, want)
			}
		}
	}
	check("no files", refresh(), nil)
	writeFile(t, a, `[{"targets": ["h:1"], "labels": {"team": "x"}}]`)
	check("a appears", refresh(), map[string]string{"a.json": "http://h:1/metrics{team=x}"})
	check("unchanged", refresh(), nil)
	writeFile(t, a, `[{"targets": ["h:1"], "labels": {"team": "y"}}]`) // same size
	check("a's labels change", refresh(), map[string]string{"a.json": "http://h:1/metrics{team=y}"})
	writeFile(t, a, `[{"targets": ["h:1"]`)
	check("a broken", refresh(), nil)
	writeFile(t, a, `[{"targets": ["h:2"]`)
	check("a broken otherwise", refresh(), nil)
	if n := lb.Count("file_sd file is broken"); n != 1 || !strings.Contains(lb.String(), "path="+a) || !strings.Contains(lb.String(), "targets=1") {
		t.Fatalf("broken file logged %d times, want once with its path and the targets kept:\n%s", n, lb)
	}
	writeFile(t, b, `[{"targets": ["h:3", "h:4"]}]`)
	check("b appears while a is broken", refresh(), map[string]string{"b.json": "http://h:3/metrics{team=} http://h:4/metrics{team=}"})
	writeFile(t, a, `[{"targets": ["h:1"], "labels": {"team": "y"}}]`)
	check("a fixed with its last good content", refresh(), nil)
	if lb.Count("file_sd file recovered") != 1 {
		t.Fatalf("recovery not logged once:\n%s", lb)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	check("b removed, read once", refresh(), nil)
	check("b removed, read twice", refresh(), map[string]string{"b.json": ""})
	if n := lb.Count("file_sd file gone"); n != 1 {
		t.Fatalf("the file gone logged %d times, want once:\n%s", n, lb)
	}
	writeFile(t, a, `[]`)
	check("a emptied, read once", refresh(), nil)
	check("a emptied, read twice", refresh(), map[string]string{"a.json": ""})
	if n := lb.Count("file_sd pattern matches no file"); n != 2 { // *.json at first, missing.yaml throughout
		t.Fatalf("patterns without files logged %d times, want 2:\n%s", n, lb)
	}
}
