package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

// writeAtomic replaces path's content at once (a rename), as a careful writer does.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// checkLabels compares the team label of every per_worker entry of a step.
func checkLabels(t *testing.T, rec stepRec, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, w := range rec.PerWorker {
		got[w.Target] = w.TargetLabels["team"]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("step %d: team labels %v, want %v", rec.Step, got, want)
	}
}

// TestRunFileSD runs "vllmstat run" with file_sd globs over files the test rewrites: targets
// and labels follow the files, a broken file keeps its last good targets (reported once, with
// its path), a new file matching a glob adds its targets, a removed one takes them away with
// their data kept in the open step, labels reach per_worker, and the recording replays to
// steps.jsonl byte for byte.
func TestRunFileSD(t *testing.T) {
	var ss []*tokenServer
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, serveTokens(t, l))
	}
	a, b, c := ss[0], ss[1], ss[2]
	hp := func(s *tokenServer) string {
		return strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/metrics")
	}
	dir := t.TempDir()
	sd := filepath.Join(dir, "sd")
	if err := os.Mkdir(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	one, two := filepath.Join(sd, "one.json"), filepath.Join(sd, "two.yaml")
	writeAtomic(t, one, fmt.Sprintf(`[{"targets": [%q], "labels": {"team": "x"}}]`, hp(a)))
	cfg := filepath.Join(dir, "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte("file_sd: [sd/*.json, sd/*.yaml]\nrefresh_interval: 100ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec.jsonl")
	r := startDiscRun(t, "--config", cfg, "--out", dir, "--record", rec)

	r.waitTargets(a.url)
	a.tokens.Add(10)
	s1 := r.endStep(1)
	checkStep(t, s1, 10, map[string]float64{a.url: 10})
	checkLabels(t, s1, map[string]string{a.url: "x"})

	writeAtomic(t, one, fmt.Sprintf(`[{"targets": [%q, %q], "labels": {"team": "y"}}]`, hp(a), b.url))
	r.waitTargets(sorted(a.url, b.url)...)
	if !testkit.Poll(20*time.Second, func() bool {
		for _, tg := range r.live().Targets {
			if tg.URL == a.url {
				return tg.Labels["team"] == "y"
			}
		}
		return false
	}) {
		t.Fatalf("a's label did not change\n%s", r.stderr.String())
	}
	a.tokens.Add(1)
	b.tokens.Add(5)
	s2 := r.endStep(2)
	checkStep(t, s2, 6, map[string]float64{a.url: 1, b.url: 5})
	checkLabels(t, s2, map[string]string{a.url: "y", b.url: "y"})

	writeAtomic(t, one, `[{"targets": [`)
	if !testkit.Poll(20*time.Second, func() bool { return strings.Contains(r.stderr.String(), "file_sd file is broken") }) {
		t.Fatalf("the broken file was not reported\n%s", r.stderr.String())
	}
	writeAtomic(t, two, fmt.Sprintf("- targets: [%q]\n  labels: {team: z}\n", hp(c)))
	r.waitTargets(sorted(a.url, b.url, c.url)...)
	a.tokens.Add(1)
	b.tokens.Add(1)
	c.tokens.Add(1)
	s3 := r.endStep(3)
	checkStep(t, s3, 3, map[string]float64{a.url: 1, b.url: 1, c.url: 1})
	checkLabels(t, s3, map[string]string{a.url: "y", b.url: "y", c.url: "z"})
	log := r.stderr.String()
	if n := strings.Count(log, "file_sd file is broken"); n != 1 || !strings.Contains(log, "path="+one) {
		t.Errorf("the broken file was reported %d times, want once with its path\n%s", n, log)
	}

	a.tokens.Add(2)
	c.tokens.Add(2)
	r.waitTokens(4) // scraped in step 4 before they go
	if err := os.Remove(two); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, one, fmt.Sprintf(`[{"targets": [%q], "labels": {"team": "w"}}]`, hp(b)))
	r.waitTargets(b.url)
	b.tokens.Add(3)
	s4 := r.endStep(4)
	checkStep(t, s4, 7, map[string]float64{a.url: 2, b.url: 3, c.url: 2})
	checkLabels(t, s4, map[string]string{a.url: "y", b.url: "w", c.url: "z"})
	if !strings.Contains(r.stderr.String(), "file_sd file recovered") {
		t.Errorf("the recovery was not reported\n%s", r.stderr.String())
	}
	r.stop()
	replayEquals(t, rec, filepath.Join(dir, "steps.jsonl"))
}

// sorted returns urls sorted, as waitTargets wants them.
func sorted(urls ...string) []string {
	slices.Sort(urls)
	return urls
}
