package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
)

// tagServer serves a vLLM page with a generation counter and its weight version at
// /weight_info as the string the test sets, as vLLM does.
type tagServer struct {
	value atomic.Int64
	mu    sync.Mutex
	tag   string
	srv   *httptest.Server
}

func newTagServer(t *testing.T, value int64, tag string) *tagServer {
	s := &tagServer{tag: tag}
	s.value.Store(value)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/weight_info" {
			s.mu.Lock()
			b, _ := json.Marshal(map[string]string{"weight_version": s.tag})
			s.mu.Unlock()
			w.Write(b)
			return
		}
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", s.value.Load())
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *tagServer) set(tag string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tag = tag
}

// TestTaggedVersions drives publishes through the collector against engines that report their
// versions as strings, every scrape a boundary scrape so that each interval's tokens are known:
// "default" is the first version published (the trainer's 0 at the start: no stale tokens); a
// name matches its version, also when the engine loaded it before the publish; a string that
// ends in a version's number is that number unless the trainer named that version otherwise;
// a string that is none of these, or is refused (control characters), leaves the version to
// inference, is logged once and quoted, and a refused one's bytes go nowhere; and the recording
// replays to the same records.
func TestTaggedVersions(t *testing.T) {
	const refused = "\x1b[2Jstep-0"
	a := newTagServer(t, 100, "default")
	b := newTagServer(t, 100, "default")
	c := newTagServer(t, 100, "banana")
	d := newTagServer(t, 100, refused)
	servers := []*tagServer{a, b, c, d}
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rw, err := record.Create(path, record.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	opt := Options{Targets: targets(a.srv.URL+"/metrics", b.srv.URL+"/metrics", c.srv.URL+"/metrics", d.srv.URL+"/metrics"),
		Recorder: rw, NoFinalStep: true, Tracker: step.Options{PerWorker: true}}
	opt.Logger = slog.New(slog.NewTextHandler(logs, nil))
	coll, _, stop := start(t, opt)
	ctx := context.Background()
	var live []step.Record
	more := func() {
		for _, s := range servers {
			s.value.Add(10)
		}
	}
	publish := func(v int64, name string) {
		t.Helper()
		p, err := coll.Publish(ctx, v, name)
		if err != nil || p.Version != v || p.Name != name {
			t.Fatalf("publish %d %q: %+v %v", v, name, p, err)
		}
	}
	more()
	endStep(t, coll, 1, &live)
	publish(0, "") // at the start: every engine holds its initial weights, "default"
	more()         // stale: c's and d's, whose versions are inferred
	endStep(t, coll, 2, &live)
	a.set("step-1") // loaded before the publish
	publish(1, "step-1")
	more() // stale: b's, c's and d's
	endStep(t, coll, 3, &live)
	publish(2, "ckpt-b")
	b.set("ckpt-b")
	more() // stale: all four: b's load is seen at the step end
	endStep(t, coll, 4, &live)
	a.set("rl-iter-3")
	c.set("step-2") // version 2 is named "ckpt-b": this is none
	publish(3, "")
	more() // stale: b's, c's and d's
	endStep(t, coll, 5, &live)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	const (
		stale  = "vllm/policy/stale_generation_tokens"
		behind = "vllm/policy/engines_behind"
		lo, hi = "vllm/policy/engine_version_min", "vllm/policy/engine_version_max"
	)
	for i, w := range []struct{ stale, behind, min, max float64 }{
		{20, 2, 0, 0},
		{30, 3, 0, 1},
		{40, 3, 1, 2},
		{30, 3, 2, 3},
	} {
		m := live[i+1].Metrics
		if m[stale] != w.stale || m[behind] != w.behind || m[lo] != w.min || m[hi] != w.max {
			t.Errorf("step %d: stale %v behind %v min %v max %v; want %+v", i+2, m[stale], m[behind], m[lo], m[hi], w)
		}
	}
	// each engine's number, where it has one: c's and d's strings are none, c's "step-2" too
	u := func(s *tagServer) string { return s.srv.URL + "/metrics" }
	for i, want := range []map[string]float64{
		{u(a): 0, u(b): 0},
		{u(a): 1, u(b): 0},
		{u(a): 1, u(b): 2},
		{u(a): 3, u(b): 2},
	} {
		got := map[string]float64{}
		for _, w := range live[i+1].PerWorker {
			if v, ok := w.Metrics["vllm/policy/version"]; ok {
				got[w.Target] = v
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("step %d: engines' versions %v, want %v", i+2, got, want)
		}
	}

	replayed := replayRecording(t, path, step.Options{PerWorker: true})
	if len(replayed) != len(live) {
		t.Fatalf("replayed %d steps, live %d", len(replayed), len(live))
	}
	for i := range live {
		x, _ := step.MarshalLine(&live[i])
		y, _ := step.MarshalLine(&replayed[i])
		if !bytes.Equal(x, y) {
			t.Errorf("step %d differs:\nlive   %s\nreplay %s", live[i].Step, x, y)
		}
	}

	out := logs.String()
	raw, _ := os.ReadFile(path)
	for _, where := range []string{out, string(raw)} {
		if strings.Contains(where, "[2J") || strings.Contains(where, "\x1b") {
			t.Errorf("the refused string went out:\n%s", where)
		}
	}
	if n := strings.Count(out, `weight_version="\"banana\""`); n != 1 {
		t.Errorf("c's string logged %d times, want once\n%s", n, out)
	}
	if n := strings.Count(out, `weight_version="\"step-2\""`); n != 1 {
		t.Errorf("c's second string logged %d times, want once\n%s", n, out)
	}
	if n := strings.Count(out, "has a control or non-printing character"); n != 1 {
		t.Errorf("d's refusal logged %d times, want once\n%s", n, out)
	}
}

// TestPublishNames: a name no engine could report, or one naming another version, is refused
// at once, saying which; the versions are left as they were.
func TestPublishNames(t *testing.T) {
	a := newTagServer(t, 100, "default")
	coll, _, stop := start(t, Options{Targets: targets(a.srv.URL + "/metrics"), NoFinalStep: true})
	defer stop()
	ctx := context.Background()
	if _, err := coll.Publish(ctx, 1, "step-1"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		v    int64
		name string
		want error
		says string
	}{
		{2, "step-1", ErrPolicyNameTaken, "(1)"},
		{2, strings.Repeat("x", 257), ErrPolicyName, "longer than 256 bytes"},
		{2, "a\tb", ErrPolicyName, "control or non-printing"},
		{2, "3", ErrPolicyName, "the number 3"},
		{1, "step-1b", ErrPolicyOrder, "the last one published is 1"},
	} {
		_, err := coll.Publish(ctx, tt.v, tt.name)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("publish %d %.20q: %v, want %v saying %q", tt.v, tt.name, err, tt.want, tt.says)
		}
	}
	if p, err := coll.Publish(ctx, 2, "2"); err != nil || p.Name != "2" {
		t.Errorf("publish 2 named \"2\": %+v %v", p, err)
	}
}

// TestVersionNamesResolve: the matching rule, case by case, and the bound on names kept.
func TestVersionNamesResolve(t *testing.T) {
	var n versionNames
	if _, ok := n.resolve("default"); ok {
		t.Error(`"default" is a version before any publish`)
	}
	n.add(5, "")
	n.add(6, "ckpt-a")
	n.add(7, "")
	n.add(8, "default-8")
	for _, tt := range []struct {
		tag string
		v   int64
		ok  bool
	}{
		{"default", 5, true},      // the first version published
		{"ckpt-a", 6, true},       // a name
		{"default-8", 8, true},    // a name
		{"step-7", 7, true},       // ends in an unnamed version's number
		{"step-9", 9, true},       // a number not published yet: an engine ahead, as "9" is
		{"step-6", 0, false},      // 6 is named "ckpt-a"
		{"step-8", 0, false},      // 8 is named "default-8"
		{"ckpt-b", 0, false},      // nothing
		{"v1.7", 0, false},        // a dotted number ends in none
		{"Default", 0, false},     // names match exactly
		{"default ", 0, false},    // names match exactly
		{"\u00e9tape-7", 7, true}, // a letter outside ASCII
	} {
		v, ok := n.resolve(tt.tag)
		if v != tt.v || ok != tt.ok {
			t.Errorf("resolve(%q) = %d %v, want %d %v", tt.tag, v, ok, tt.v, tt.ok)
		}
	}

	var m versionNames
	m.add(0, "default") // the trainer names the initial weights itself
	if v, ok := m.resolve("default"); !ok || v != 0 {
		t.Errorf(`"default" named by the trainer: %d %v`, v, ok)
	}
	for v := int64(1); v <= maxNames+1; v++ {
		m.add(v, fmt.Sprintf("n%d-x", v))
	}
	if len(m.byName) != maxNames || len(m.named) != maxNames || len(m.order) != maxNames {
		t.Errorf("kept %d names, %d versions, order %d; want %d", len(m.byName), len(m.named), len(m.order), maxNames)
	}
	if _, ok := m.resolve("n1-x"); ok {
		t.Error("the oldest name is kept past the bound")
	}
	if v, ok := m.resolve("n2-x"); !ok || v != 2 {
		t.Errorf("n2: %d %v", v, ok)
	}
	if v, ok := m.resolve("default"); !ok || v != 0 {
		t.Errorf(`"default" after its name went: %d %v, want the first version`, v, ok)
	}
}
