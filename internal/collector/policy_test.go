package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// versionServer serves a vLLM page with a generation counter and, unless version is below 0,
// its weight version at /weight_info; it counts the version requests.
type versionServer struct {
	value, version atomic.Int64
	asked          atomic.Int64 // /weight_info requests
	srv            *httptest.Server
}

func newVersionServer(t *testing.T, value, version int64) *versionServer {
	s := &versionServer{}
	s.value.Store(value)
	s.version.Store(version)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/weight_info" {
			s.asked.Add(1)
			if v := s.version.Load(); v >= 0 {
				fmt.Fprintf(w, `{"weight_version": "%d"}`, v)
				return
			}
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %d\n", s.value.Load())
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// TestPolicyLiveAndReplayed drives publishes through the collector against an engine that
// reports its version and one that reports none: a publish takes effect after a boundary
// scrape; versions are read at boundary scrapes from the first publish on (its own too), and at
// the next tick's scrape of an engine behind; the stale tokens are exact; a version that does
// not grow is refused; the recording replays to the same records; and before the first publish
// no engine is asked.
func TestPolicyLiveAndReplayed(t *testing.T) {
	a := newVersionServer(t, 100, 0)
	b := newVersionServer(t, 1000, -1) // no version endpoint
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rw, err := record.Create(path, record.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, fc, stop := start(t, Options{Targets: targets(a.srv.URL+"/metrics", b.srv.URL+"/metrics"), Recorder: rw, NoFinalStep: true,
		Tracker: step.Options{PerWorker: true}})
	ctx := context.Background()
	var live []step.Record
	a.value.Store(110)
	endStep(t, c, 1, &live) // no publish yet: nobody is asked
	if n := a.asked.Load() + b.asked.Load(); n != 0 {
		t.Fatalf("version endpoints asked %d times before any publish", n)
	}
	p1, err := c.Publish(ctx, 1, "")
	if err != nil || p1.Version != 1 {
		t.Fatalf("publish 1: %+v %v", p1, err)
	}
	a.value.Store(150) // stale: a holds 0, read at the publish's boundary scrape
	b.value.Store(1010)
	endStep(t, c, 2, &live)
	a.value.Store(200)  // stale
	b.value.Store(1030) // stale: b holds a version older than 1
	a.version.Store(1)
	endStep(t, c, 3, &live) // reads a's 1
	a.value.Store(230)
	endStep(t, c, 4, &live)

	for _, v := range []int64{1, 0} {
		if _, err := c.Publish(ctx, v, ""); !errors.Is(err, ErrPolicyOrder) || !strings.Contains(err.Error(), "the last one published is 1") {
			t.Errorf("publish %d after 1: %v, want ErrPolicyOrder naming 1", v, err)
		}
	}
	if _, err := c.Publish(ctx, MaxStep+1, ""); !errors.Is(err, ErrPolicyRange) {
		t.Errorf("publish 2^53+1: %v", err)
	}
	if _, err := c.Publish(ctx, 2, ""); err != nil {
		t.Fatal(err)
	}
	asked := a.asked.Load()
	a.version.Store(2)
	fc.Advance(time.Second) // a tick: a, behind, reads its version at this scrape
	testkit.WaitFor(t, 5*time.Second, "a's version read at the tick", func() bool { return a.asked.Load() > asked })
	a.value.Store(260) // fresh, if the tick's reading was taken: the boundary scrape reads it too
	endStep(t, c, 5, &live)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := b.asked.Load(); n != 1 {
		t.Errorf("the engine without a version endpoint was asked %d times, want once", n)
	}

	const (
		ver    = "vllm/policy/version"
		stale  = "vllm/policy/stale_generation_tokens"
		behind = "vllm/policy/engines_behind"
	)
	for _, k := range []string{ver, stale, behind, "vllm/policy/engine_version_min"} {
		if _, ok := live[0].Metrics[k]; ok {
			t.Errorf("step 1, before any publish, has %s", k)
		}
	}
	for i, w := range []struct{ version, stale, behind, min, max float64 }{
		{1, 40 + 10, 2, 0, 0},
		{1, 50 + 20, 1, 1, 1},
		{1, 0, 1, 1, 1},
		{2, 0, 1, 2, 2},
	} {
		m := live[i+1].Metrics
		if m[ver] != w.version || m[stale] != w.stale || m[behind] != w.behind || m["vllm/policy/engine_version_min"] != w.min || m["vllm/policy/engine_version_max"] != w.max {
			t.Errorf("step %d: version %v stale %v behind %v min %v max %v; want %+v", i+2, m[ver], m[stale], m[behind],
				m["vllm/policy/engine_version_min"], m["vllm/policy/engine_version_max"], w)
		}
	}
	if lag := live[2].Metrics["vllm/policy/publish_lag_s/max"]; lag <= 0 {
		t.Errorf("step 3: version 1 landed on a, lag %v", lag)
	}

	replayed := replayRecording(t, path, step.Options{PerWorker: true})
	if len(replayed) != len(live) {
		t.Fatalf("replayed %d steps, live %d", len(replayed), len(live))
	}
	for i := range live {
		x, _ := step.MarshalLine(&live[i])
		y, _ := step.MarshalLine(&replayed[i])
		if string(x) != string(y) {
			t.Errorf("step %d differs:\nlive   %s\nreplay %s", live[i].Step, x, y)
		}
	}
	raw, _ := os.ReadFile(path)
	if n := strings.Count(string(raw), `"kind":"engine_version"`); n != 3 {
		t.Errorf("%d engine_version events, want 3 (a's 0, 1 and 2: only changes)\n%s", n, raw)
	}
	if n := strings.Count(string(raw), `"kind":"policy"`); n != 2 {
		t.Errorf("%d policy events, want 2", n)
	}
}
