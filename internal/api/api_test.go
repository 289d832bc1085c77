package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/collector"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/target"
)

// fakeCollector keeps closed steps like the collector does.
type fakeCollector struct {
	steps   []step.Record
	last    int64
	ended   bool // a step was ended: last is its number
	targets []string
	auth    map[string]target.Auth
	phase   string // the open phase

	phaseTrace string // the traceparent of the last phase start

	version   int64 // the last policy version published, when published
	published bool
	name      string // the last version's name
}

// StartPhase and EndPhase keep the open phase as the collector does, with its errors.
func (f *fakeCollector) StartPhase(ctx context.Context, name string) (collector.PhaseEdge, error) {
	if err := step.ValidPhase(name); err != nil {
		return collector.PhaseEdge{}, fmt.Errorf("%w: %v", collector.ErrPhaseName, err)
	}
	f.phaseTrace = collector.TraceParent(ctx)
	e := collector.PhaseEdge{Phase: name, Edge: "start", Ended: f.phase}
	f.phase = name
	return e, nil
}

func (f *fakeCollector) EndPhase(_ context.Context, name string) (collector.PhaseEdge, error) {
	if err := step.ValidPhase(name); err != nil {
		return collector.PhaseEdge{}, fmt.Errorf("%w: %v", collector.ErrPhaseName, err)
	}
	if f.phase != name {
		return collector.PhaseEdge{}, fmt.Errorf("end phase %q: %w", name, collector.ErrPhaseNotOpen)
	}
	f.phase = ""
	return collector.PhaseEdge{Phase: name, Edge: "end"}, nil
}

func (f *fakeCollector) EndStep(ctx context.Context, n int64) (step.Record, error) {
	if n < 0 {
		n = f.last + 1
	}
	if f.ended && n <= f.last {
		return step.Record{}, fmt.Errorf("step %d: %w (the last step ended or being ended is %d)", n, collector.ErrStepOrder, f.last)
	}
	f.last, f.ended = n, true
	r := step.Record{Step: n, End: time.Date(2026, 1, 1, 0, 0, int(n%60), 0, time.UTC), Metrics: map[string]float64{"vllm/num_preemptions": float64(n)},
		TraceParent: collector.TraceParent(ctx)}
	f.steps = append(f.steps, r)
	return r, nil
}

func (f *fakeCollector) Live(context.Context) (step.Record, []collector.TargetState, error) {
	return step.Record{Metrics: map[string]float64{}}, []collector.TargetState{{URL: "http://a/metrics", Up: true}}, nil
}

func (f *fakeCollector) Steps(_ context.Context, since int64) ([]step.Record, error) {
	var out []step.Record
	for _, r := range f.steps {
		if r.Step >= since {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeCollector) Targets(context.Context) ([]string, error) { return f.targets, nil }

func (f *fakeCollector) SetTargets(_ context.Context, ts []target.Target) error {
	f.targets = f.targets[:0]
	f.auth = map[string]target.Auth{}
	for _, t := range ts {
		f.targets = append(f.targets, t.URL)
		f.auth[t.URL] = t.Auth
	}
	return nil
}

func (f *fakeCollector) AddTargets(context.Context, []target.Target) error { return nil }
func (f *fakeCollector) RemoveTargets(context.Context, []string) error     { return nil }

func do(t *testing.T, h http.Handler, method, path, body, token string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	// As a program calls the API on loopback: by its address, with JSON.
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9400}
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
	req.Host = local.String()
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var out map[string]any
	b, _ := io.ReadAll(w.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, b)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: content type %q", method, path, ct)
	}
	return w.Code, out
}

func TestEndpoints(t *testing.T) {
	fc := &fakeCollector{}
	h := New(Options{Collector: fc})
	tests := []struct {
		method, path, body string
		code               int
		check              func(t *testing.T, out map[string]any)
	}{
		{"GET", "/healthz", "", 200, func(t *testing.T, o map[string]any) { eq(t, o["status"], "ok") }},
		{"POST", "/v1/steps/end", `{"step": 5}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["step"], 5.0) }},
		{"POST", "/v1/steps/end", `{"step": 5}`, 409, hasErr("must be greater")},
		{"POST", "/v1/steps/end", `{"step": 3}`, 409, hasErr("step 3")},
		{"POST", "/v1/steps/end", `{"step": 10}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["step"], 10.0) }}, // steps may skip
		{"POST", "/v1/steps/end", `{"step": "x"}`, 400, hasErr("whole number")},
		{"POST", "/v1/steps/end", `{"step": 11, "extra": 1}`, 400, hasErr("unknown field")},
		{"POST", "/v1/steps/end", `not json`, 400, hasErr("malformed JSON")},
		{"POST", "/v1/steps/end", ``, 400, hasErr("empty request body")},
		{"POST", "/v1/steps/end", `{}`, 400, hasErr(`missing "step"`)},
		{"POST", "/v1/steps/end", `{"step": -2}`, 400, hasErr("from 0 to 9007199254740992")},
		{"POST", "/v1/steps/end", `{"step": 12}` + strings.Repeat(" ", MaxBody), 413, hasErr("larger than")},
		{"GET", "/v1/steps/10", "", 200, func(t *testing.T, o map[string]any) { eq(t, o["step"], 10.0) }},
		{"POST", "/v1/phases/end", `{"phase": "rollout"}`, 409, hasErr(`phase "rollout"`)},
		{"POST", "/v1/phases/start", `{"phase": "rollout"}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["phase"], "rollout"); eq(t, o["edge"], "start") }},
		{"POST", "/v1/phases/start", `{"phase": "eval"}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["ended"], "rollout") }},
		{"POST", "/v1/phases/end", `{"phase": "eval"}`, 200, func(t *testing.T, o map[string]any) { eq(t, o["edge"], "end") }},
		{"POST", "/v1/phases/start", `{"phase": "Roll-out"}`, 400, hasErr("lower-case letter")},
		{"POST", "/v1/phases/start", `{"phase": "kv_cache_usage_perc"}`, 400, hasErr("name of a step key")},
		{"POST", "/v1/phases/start", `{}`, 400, hasErr(`missing "phase"`)},
		{"POST", "/v1/phases/start", `{"phase": 3}`, 400, hasErr("malformed JSON")},
		{"GET", "/v1/phases/start", "", 405, hasErr("not allowed")},
		{"GET", "/v1/steps/7", "", 404, hasErr("step 7 is unknown")},
		{"GET", "/v1/steps/x", "", 400, hasErr(`step "x" is not allowed: must be a whole number in decimal digits`)},
		{"GET", "/v1/steps?since=6", "", 200, func(t *testing.T, o map[string]any) { eq(t, len(o["steps"].([]any)), 1) }},
		{"GET", "/v1/steps", "", 200, func(t *testing.T, o map[string]any) { eq(t, len(o["steps"].([]any)), 2) }},
		{"GET", "/v1/steps?since=abc", "", 400, hasErr(`since="abc" is not allowed: must be a whole number in decimal digits`)},
		{"GET", "/v1/live", "", 200, func(t *testing.T, o map[string]any) { eq(t, len(o["targets"].([]any)), 1) }},
		{"PUT", "/v1/targets", `{"targets": ["http://a:1/metrics", "https://b:2/m", "http://a:1/metrics"]}`, 200, func(t *testing.T, o map[string]any) { eq(t, len(o["targets"].([]any)), 2) }},
		{"GET", "/v1/targets", "", 200, func(t *testing.T, o map[string]any) { eq(t, o["targets"].([]any)[1], "https://b:2/m") }},
		{"PUT", "/v1/targets", `{"targets": ["ftp://a/metrics", "a:1"]}`, 400, hasErr(`targets[0]: "ftp://a/metrics": only http and https`)},
		{"PUT", "/v1/targets", `{}`, 400, hasErr(`missing "targets"`)},
		{"PATCH", "/v1/targets", "", 405, hasErr("not allowed")},
		{"DELETE", "/v1/targets", "", 400, hasErr("empty request body")},
		{"GET", "/v1/nothing", "", 404, hasErr("no such endpoint")},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, out := do(t, h, tt.method, tt.path, tt.body, "")
			if code != tt.code {
				t.Fatalf("code %d, want %d: %v", code, tt.code, out)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func TestAuth(t *testing.T) {
	h := New(Options{Collector: &fakeCollector{}, Token: "s3cret"})
	if code, _ := do(t, h, "GET", "/v1/live", "", ""); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, out := do(t, h, "GET", "/v1/live", "", "wrong"); code != 401 || out["error"] == nil {
		t.Errorf("wrong token: %d %v", code, out)
	}
	if code, _ := do(t, h, "GET", "/v1/live", "", "s3cret"); code != 200 {
		t.Errorf("right token: %d", code)
	}
	if code, _ := do(t, h, "POST", "/v1/steps/end", `{"step":1}`, ""); code != 401 {
		t.Errorf("end step without token: %d", code)
	}
	if code, _ := do(t, h, "GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz needs no token: %d", code)
	}
}

func eq(t *testing.T, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("got %v (%T), want %v (%T)", got, got, want, want)
	}
}

func hasErr(sub string) func(t *testing.T, o map[string]any) {
	return func(t *testing.T, o map[string]any) {
		t.Helper()
		msg, _ := o["error"].(string)
		if !strings.Contains(msg, sub) {
			t.Errorf("error %q lacks %q", msg, sub)
		}
	}
}

// postTraced POSTs body to path as a program on loopback does, with traceparent as its header
// when not "", and returns the status.
func postTraced(h http.Handler, path, body, traceparent string) int {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9400}
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
	req.Host = local.String()
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

// A phase call's traceparent reaches the collector as a step end's does.
func TestPhaseTraceParent(t *testing.T) {
	fc := &fakeCollector{}
	h := New(Options{Collector: fc})
	const a = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct{ header, body string }{{a, ""}, {"", a}} {
		body := `{"phase": "rollout"}`
		if tc.body != "" {
			body = fmt.Sprintf(`{"phase": "rollout", "traceparent": %q}`, tc.body)
		}
		fc.phaseTrace = ""
		if code := postTraced(h, "/v1/phases/start", body, tc.header); code != 200 || fc.phaseTrace != a {
			t.Errorf("header %q, body %q: %d, traceparent %q", tc.header, tc.body, code, fc.phaseTrace)
		}
	}
}

// A step end's W3C traceparent, as a header (an instrumented client's) or in the body, reaches
// the collector; the header wins.
func TestEndStepTraceParent(t *testing.T) {
	fc := &fakeCollector{}
	h := New(Options{Collector: fc})
	const a, b = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for i, tc := range []struct{ header, body, want string }{{a, "", a}, {"", b, b}, {a, b, a}, {"", "", ""}} {
		body := fmt.Sprintf(`{"step": %d}`, i+1)
		if tc.body != "" {
			body = fmt.Sprintf(`{"step": %d, "traceparent": %q}`, i+1, tc.body)
		}
		code := postTraced(h, "/v1/steps/end", body, tc.header)
		if code != 200 || len(fc.steps) != i+1 || fc.steps[i].TraceParent != tc.want {
			t.Errorf("header %q, body %q: %d, traceparent %q, want %q", tc.header, tc.body, code, fc.steps[len(fc.steps)-1].TraceParent, tc.want)
		}
	}
}
