package remotewrite

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/promtest"
	"github.com/vllmstat/vllmstat/internal/sink"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

var (
	runOnce sync.Once
	theRun  *promtest.Run
	runErr  error
)

// testRun is one simulated run shared by the package's tests: 2 servers with 2 engines each,
// 6 steps of 5 one-second scrapes, ending now, with per-worker records.
func testRun(t *testing.T) *promtest.Run {
	t.Helper()
	runOnce.Do(func() {
		theRun, runErr = promtest.SimulateRun(promtest.RunOptions{Servers: 2, DP: 2, Steps: 6, Scrapes: 5,
			Interval: time.Second, End: time.Now(), Prefix: "vllm", PerWorker: true, Seed: 7})
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	return theRun
}

// seriesKey spells a series as the receiver stores it: __name__ first, the other labels sorted,
// empty ones left out.
func seriesKey(name string, labels, extra []promname.Label) string {
	var ls []string
	for _, l := range append(append([]promname.Label(nil), labels...), extra...) {
		if l.Value != "" {
			ls = append(ls, l.Name+"="+l.Value)
		}
	}
	sort.Strings(ls)
	return strings.Join(append([]string{"__name__=" + name}, ls...), ",")
}

// expected returns the samples the records and intervals should become, by series, in time
// order.
func expected(recs []step.Record, ivs []step.Interval, extra []promname.Label) (map[string][][2]float64, int) {
	out := map[string][][2]float64{}
	n := 0
	for i := range recs {
		t := float64(recs[i].End.UnixMilli())
		promname.WalkStep("vllm", &recs[i], func(name string, labels []promname.Label, v float64) {
			k := seriesKey(name, labels, extra)
			out[k] = append(out[k], [2]float64{v, t})
			n++
		})
	}
	for i := range ivs {
		t := float64(ivs[i].TS.UnixMilli())
		promname.WalkInterval("vllm", &ivs[i], func(name string, labels []promname.Label, v float64) {
			k := seriesKey(name, labels, extra)
			out[k] = append(out[k], [2]float64{v, t})
			n++
		})
	}
	return out, n
}

func compare(t *testing.T, got, want map[string][][2]float64) {
	t.Helper()
	bad := 0
	for _, k := range sortedKeys(want) {
		g, w := got[k], want[k]
		if fmt.Sprint(g) != fmt.Sprint(w) {
			if bad++; bad <= 5 {
				t.Errorf("series %s:\n got  %v\n want %v", k, g, w)
			}
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			if bad++; bad <= 5 {
				t.Errorf("unexpected series %s", k)
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d series differ", bad)
	}
}

var testExtra = []promname.Label{{Name: "job", Value: "rl"}, {Name: "run", Value: "test"}}

func testSettings(url string) Settings {
	s := DefaultSettings()
	s.URL = url
	s.BatchSize = 100
	s.Timeout = 300 * time.Millisecond
	s.MinBackoff, s.MaxBackoff = 5*time.Millisecond, 40*time.Millisecond
	s.ExtraLabels = testExtra
	return s
}

func newLog() (*slog.Logger, *syncbuf.Buffer) {
	lb := &syncbuf.Buffer{}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

// newWriter is NewWithSettings started, as the sink runtime starts it.
func newWriter(s Settings, prefix string, log *slog.Logger) *Writer {
	w := NewWithSettings(s, prefix, log)
	w.Start()
	return w
}

// deliver writes recs through the sink runtime, which retries a failed step with the writer's
// backoff, and closes it.
func deliver(t *testing.T, w *Writer, recs []step.Record) {
	t.Helper()
	rt := sink.NewRuntime(nil)
	st := rt.Add(w, sink.LaneOptions{Name: "remote_write"})
	rt.Start()
	for i := range recs {
		if err := rt.Write(t.Context(), &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st.Written.Load() != int64(len(recs)) {
		t.Fatalf("delivered %d of %d steps", st.Written.Load(), len(recs))
	}
}

func writeAll(t *testing.T, w *Writer, recs []step.Record) {
	t.Helper()
	for i := range recs {
		if err := w.Write(t.Context(), &recs[i]); err != nil {
			t.Fatalf("write step %d: %v", recs[i].Step, err)
		}
	}
}

func TestWriteSendsEveryStepSample(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	w := newWriter(testSettings(r.url()), "vllm", nil)
	writeAll(t, w, run.Records)
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	want, n := expected(run.Records, nil, testExtra)
	got, samples, requests := r.stored()
	compare(t, got, want)
	if samples != n || w.Stats().Written.Load() != int64(n) {
		t.Errorf("stored %d samples, written %d; want %d", samples, w.Stats().Written.Load(), n)
	}
	wantReq := 0
	for i := range run.Records {
		k := 0
		promname.WalkStep("vllm", &run.Records[i], func(string, []promname.Label, float64) { k++ })
		wantReq += (k + 99) / 100
	}
	if requests != wantReq {
		t.Errorf("%d requests, want %d (batches of 100)", requests, wantReq)
	}
	t.Logf("%d steps: %d samples in %d requests", len(run.Records), n, requests)
}

func TestAuthHeaders(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	s := testSettings(r.url())
	s.Username, s.Password = "vllm", "s3cret"
	w := newWriter(s, "vllm", nil)
	writeAll(t, w, run.Records[:1])
	s.Username, s.Password, s.BearerToken = "", "", "tok"
	s.Headers = map[string]string{"X-Scope-Orgid": "team-a"}
	w = newWriter(s, "vllm", nil)
	writeAll(t, w, run.Records[:1])
	r.mu.Lock()
	defer r.mu.Unlock()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("vllm:s3cret"))
	if got := r.headers[0].Get("Authorization"); got != basic {
		t.Errorf("basic auth header %q, want %q", got, basic)
	}
	if got := r.headers[len(r.headers)-1].Get("Authorization"); got != "Bearer tok" {
		t.Errorf("bearer header %q", got)
	}
	if got := r.headers[len(r.headers)-1].Get("X-Scope-OrgID"); got != "team-a" {
		t.Errorf("X-Scope-OrgID header %q", got)
	}
}

func TestServerErrorsAreRetried(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.set(mode{}, mode{status: 500}, mode{status: 502}, mode{status: 429, retryAfter: "0"}, mode{status: 503})
	s := testSettings(r.url())
	w := newWriter(s, "vllm", nil)
	deliver(t, w, run.Records[:2])
	want, n := expected(run.Records[:2], nil, testExtra)
	got, samples, _ := r.stored()
	compare(t, got, want)
	st := w.Stats()
	if samples != n || st.Errors.Load() != 4 || st.Dropped.Load() != 0 {
		t.Errorf("stored %d of %d samples; errors %d (want 4), dropped %d", samples, n, st.Errors.Load(), st.Dropped.Load())
	}
}

func TestSlowReceiverTimesOutAndIsRetried(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.set(mode{}, mode{hang: true}, mode{hang: true})
	s := testSettings(r.url())
	s.Timeout = 100 * time.Millisecond
	w := newWriter(s, "vllm", nil)
	start := time.Now()
	deliver(t, w, run.Records[:1])
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("write took %s; two timeouts of 100ms should come first", d)
	}
	want, _ := expected(run.Records[:1], nil, testExtra)
	got, _, _ := r.stored()
	compare(t, got, want)
	if e := w.Stats().Errors.Load(); e != 2 {
		t.Errorf("errors %d, want 2", e)
	}
}

func TestRejectedBatchesAreDroppedNotRetried(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.set(mode{status: 400, body: "out of order sample"})
	log, lb := newLog()
	w := newWriter(testSettings(r.url()), "vllm", log)
	writeAll(t, w, run.Records[:2]) // no error: a rejection is not worth a retry by the runtime
	_, n := expected(run.Records[:2], nil, testExtra)
	_, _, requests := r.stored()
	st := w.Stats()
	if st.Dropped.Load() != int64(n) || st.Written.Load() != 0 || st.Errors.Load() != 0 {
		t.Errorf("dropped %d (want %d), written %d, errors %d", st.Dropped.Load(), n, st.Written.Load(), st.Errors.Load())
	}
	if want := (n/2 + 99) / 100 * 2; requests < want-2 || requests > want+2 {
		t.Errorf("%d requests; want one per batch (about %d), no retries", requests, want)
	}
	if c := lb.Count("remote write rejected"); c != 1 {
		t.Errorf("logged the rejection %d times, want once", c)
	}
	if c := lb.Count("out of order sample"); c != 1 {
		t.Errorf("the receiver's answer is in the log %d times, want once", c)
	}
	// A success ends the episode; the next rejection is logged again.
	r.set(mode{}, mode{}, mode{status: 400, body: "again"})
	writeAll(t, w, run.Records[2:4])
	if c := lb.Count("remote write rejected"); c != 2 {
		t.Errorf("logged %d rejections, want 2", c)
	}
}

func TestWriteResumesAfterGivingUp(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	// The first batch is stored, the next fails: Write tries once, the runtime retries.
	r.set(mode{status: 500}, mode{})
	s := testSettings(r.url())
	w := newWriter(s, "vllm", nil)
	rec := &run.Records[0]
	if err := w.Write(t.Context(), rec); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("write = %v, want the 500", err)
	}
	if e := w.Stats().Errors.Load(); e != 1 {
		t.Errorf("errors %d, want 1: retries are the sink runtime's", e)
	}
	r.set(mode{})
	if err := w.Write(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	want, n := expected(run.Records[:1], nil, testExtra)
	got, samples, _ := r.stored()
	compare(t, got, want) // every sample once: the first batch was not sent again
	if samples != n {
		t.Errorf("stored %d samples, want %d", samples, n)
	}
}

func TestReceiverDownThenBack(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.down()
	s := testSettings(r.url())
	s.Intervals = true
	w := newWriter(s, "vllm", nil)
	defer closeSoon(w)
	if err := w.Write(t.Context(), &run.Records[0]); err == nil {
		t.Fatal("write to a closed port succeeded")
	}
	for _, iv := range run.Intervals {
		w.Interval(iv)
	}
	_, n := expected(nil, run.Intervals, testExtra)
	if q := w.Stats().Queued.Load(); q != int64(n) {
		t.Errorf("queued %d interval samples, want %d", q, n)
	}
	// Wait for a few failed retries of the interval sender (the step's one failure counts too).
	testkit.WaitFor(t, 5*time.Second, "failed retries", func() bool { return w.Stats().Errors.Load() >= 3 })
	r.up()
	testkit.WaitFor(t, 5*time.Second, "the buffer to drain", func() bool { return w.Stats().Queued.Load() == 0 })
	writeAll(t, w, run.Records) // the sink runtime's retry of step 1, then the others
	want, total := expected(run.Records, run.Intervals, testExtra)
	got, samples, _ := r.stored()
	compare(t, got, want)
	st := w.Stats()
	if samples != total || st.Dropped.Load() != 0 || st.Errors.Load() < 3 {
		t.Errorf("stored %d of %d samples, dropped %d, errors %d", samples, total, st.Dropped.Load(), st.Errors.Load())
	}
}

func TestIntervalBufferIsBounded(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.down()
	s := testSettings(r.url())
	s.Intervals = true
	s.QueueSize = 500
	log, lb := newLog()
	w := newWriter(s, "vllm", log)
	defer closeSoon(w)
	// Feed intervals one at a time and remember which samples fit.
	var kept []step.Interval
	fitted := 0
	for _, iv := range run.Intervals {
		k := 0
		promname.WalkInterval("vllm", &iv, func(string, []promname.Label, float64) { k++ })
		w.Interval(iv)
		if fitted+k <= 500 {
			kept = append(kept, iv)
			fitted += k
		}
	}
	_, n := expected(nil, run.Intervals, testExtra)
	st := w.Stats()
	if st.Queued.Load() != 500 || st.Dropped.Load() != int64(n-500) {
		t.Errorf("queued %d (want 500), dropped %d (want %d)", st.Queued.Load(), st.Dropped.Load(), n-500)
	}
	if c := lb.Count("interval buffer full"); c != 1 {
		t.Errorf("logged a full buffer %d times, want once", c)
	}
	r.up()
	testkit.WaitFor(t, 5*time.Second, "the buffer to drain", func() bool { return st.Queued.Load() == 0 })
	got, samples, _ := r.stored()
	if samples != 500 || st.Written.Load() != 500 {
		t.Fatalf("stored %d, written %d; want the 500 buffered", samples, st.Written.Load())
	}
	// The first 500 samples arrived, in order: the whole intervals that fit, then part of the
	// next one.
	want, _ := expected(nil, kept, testExtra)
	for k, w := range want {
		if fmt.Sprint(got[k][:len(w)]) != fmt.Sprint(w) {
			t.Errorf("series %s: got %v, want it to start with %v", k, got[k], w)
		}
	}
}

func TestCloseGivesUpAtTheDeadline(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.down()
	s := testSettings(r.url())
	s.Intervals = true
	w := newWriter(s, "vllm", nil)
	for _, iv := range run.Intervals {
		w.Interval(iv)
	}
	_, n := expected(nil, run.Intervals, testExtra)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Close(ctx)
	if d := time.Since(start); d > 10*time.Second { // without the deadline it would retry for long
		t.Errorf("Close took %s with a 200ms deadline", d)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d interval samples", n)) {
		t.Errorf("Close = %v, want %d samples not sent", err, n)
	}
	select {
	case <-w.done:
	default:
		t.Error("the sending goroutine is still running")
	}
	w.Interval(run.Intervals[0]) // after Close: dropped, no panic
	if st := w.Stats(); st.Queued.Load() != 0 || st.Dropped.Load() <= int64(n) {
		t.Errorf("queued %d, dropped %d after Close", st.Queued.Load(), st.Dropped.Load())
	}
}

func TestCloseDrains(t *testing.T) {
	run := testRun(t)
	r := newReceiver(t)
	r.set(mode{}, mode{status: 503}, mode{status: 503})
	s := testSettings(r.url())
	s.Intervals = true
	w := newWriter(s, "vllm", nil)
	for _, iv := range run.Intervals {
		w.Interval(iv)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	want, n := expected(nil, run.Intervals, testExtra)
	got, samples, _ := r.stored()
	compare(t, got, want)
	if samples != n {
		t.Errorf("stored %d of %d", samples, n)
	}
}

func TestIntervalsOffStartsNothing(t *testing.T) {
	w := newWriter(testSettings("http://127.0.0.1:1/api/v1/write"), "vllm", nil)
	w.Interval(step.Interval{Values: []step.IntervalValue{{Key: "num_preemptions", V: 1}}})
	if w.done != nil || w.Stats().Queued.Load() != 0 {
		t.Error("intervals off, but the writer buffers them")
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestIntervalsWithinOneMillisecond: two scrapes of one worker within a millisecond (a boundary
// scrape right after a tick's) give two samples a millisecond apart, not two at one time, which
// Prometheus rejects as duplicates.
func TestIntervalsWithinOneMillisecond(t *testing.T) {
	r := newReceiver(t)
	s := testSettings(r.url())
	s.Intervals = true
	w := newWriter(s, "vllm", nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 200_000, time.UTC)
	for i, v := range []float64{3, 4, 5} {
		w.Interval(step.Interval{WorkerID: step.WorkerID{Target: "http://h:1/metrics", Engine: "0"},
			TS: t0.Add(time.Duration(i) * 300 * time.Microsecond), Values: []step.IntervalValue{{Key: "num_requests_running", V: v}}})
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _, _ := r.stored()
	n := 0
	for k, samples := range got {
		if !strings.Contains(k, "num_requests_running") {
			continue
		}
		n++
		want := [][2]float64{{3, float64(t0.UnixMilli())}, {4, float64(t0.UnixMilli() + 1)}, {5, float64(t0.UnixMilli() + 2)}}
		if fmt.Sprint(samples) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", k, samples, want)
		}
	}
	if n != 1 {
		t.Fatalf("%d running series stored: %v", n, got)
	}
}

// closeSoon closes w with a deadline, so that a test that fails while its receiver is down
// ends instead of waiting for samples that can never be sent.
func closeSoon(w *Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.Close(ctx)
}
