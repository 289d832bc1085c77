package record

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
)

// callLog is a Tracker that writes down every call, one line each, with times as seconds after
// t0.
type callLog struct {
	t0        time.Time
	calls     []string
	latest    int64 // the last version published, when published
	published bool
}

func (c *callLog) at(ts time.Time) string { return fmt.Sprint(ts.Sub(c.t0).Seconds()) }

func (c *callLog) Begin(ts time.Time) { c.calls = append(c.calls, "begin "+c.at(ts)) }

func (c *callLog) Observe(ts time.Time, target string, page *page.Page, err error) bool {
	switch {
	case err != nil && step.Refused(err):
		c.calls = append(c.calls, fmt.Sprintf("observe %s %s refused err=%v", c.at(ts), target, err))
	case err != nil:
		c.calls = append(c.calls, fmt.Sprintf("observe %s %s err=%v", c.at(ts), target, err))
	case page == nil:
		c.calls = append(c.calls, fmt.Sprintf("observe %s %s no page", c.at(ts), target))
	default:
		c.calls = append(c.calls, fmt.Sprintf("observe %s %s engines=%d", c.at(ts), target, len(page.Engines)))
	}
	return false
}

func (c *callLog) Forget(targets ...string) {
	c.calls = append(c.calls, "forget "+strings.Join(targets, ","))
}

func (c *callLog) Added(target string) { c.calls = append(c.calls, "added "+target) }

func (c *callLog) SetTargetLabels(target string, labels map[string]string) {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	c.calls = append(c.calls, fmt.Sprintf("labels %s {%s}", target, strings.Join(kv, ",")))
}

func (c *callLog) StartPhase(name string, ts time.Time) {
	c.calls = append(c.calls, "phase start "+name+" "+c.at(ts))
}

func (c *callLog) EndPhase(name string, ts time.Time) bool {
	c.calls = append(c.calls, "phase end "+name+" "+c.at(ts))
	return true
}

func (c *callLog) Publish(v int64, ts time.Time) bool {
	c.calls = append(c.calls, fmt.Sprintf("publish %d %s", v, c.at(ts)))
	if c.published && v <= c.latest {
		return false
	}
	c.latest, c.published = v, true
	return true
}

func (c *callLog) EngineVersion(ts time.Time, target string, v int64, reports bool) {
	if !reports {
		c.calls = append(c.calls, fmt.Sprintf("engine version %s %s none", c.at(ts), target))
		return
	}
	c.calls = append(c.calls, fmt.Sprintf("engine version %s %s %d", c.at(ts), target, v))
}

func (c *callLog) ServerVersion(ts time.Time, target, addr string, v int64, reports bool) {
	if !reports {
		c.calls = append(c.calls, fmt.Sprintf("server version %s %s %s none", c.at(ts), target, addr))
		return
	}
	c.calls = append(c.calls, fmt.Sprintf("server version %s %s %s %d", c.at(ts), target, addr, v))
}

func (c *callLog) EndStep(n int64, ts time.Time) step.Record {
	c.calls = append(c.calls, fmt.Sprintf("end step %d %s", n, c.at(ts)))
	return step.Record{Step: n, End: ts}
}

// recording writes events as a recording's lines, the i-th at t0 plus i seconds.
func recording(t0 time.Time, events ...Event) string {
	var b strings.Builder
	for i, e := range events {
		e.TS = t0.Add(time.Duration(i) * time.Second)
		line, err := e.MarshalJSON()
		if err != nil {
			panic(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func body(s string) *string { return &s }

// TestReplayCalls: every kind of event becomes its tracker call, in order; removals in a row
// are forgotten in one call before the next event; a gap and a page that is not Prometheus text
// are told to their hooks, the page also observed as a failed scrape; a refused scrape is one
// that step.Refused tells, as the run's was, and an error that only reads so is not.
func TestReplayCalls(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const a, b = "http://a:8000/metrics", "http://b:8000/metrics"
	page := "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1\nvllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2\n"
	in := recording(t0,
		Event{Kind: KindStart},
		Event{Kind: KindTarget, Target: a, Labels: map[string]string{"team": "x", "zone": "z"}},
		Event{Kind: KindAdd, Target: b},
		Event{Kind: KindScrape, Target: a, Body: body(page)},
		Event{Kind: KindScrape, Target: b, Error: "connection refused"},
		Event{Kind: KindScrape, Target: b, Error: "dial tcp: connect: connection refused", Refused: true},
		Event{Kind: KindPhase, Phase: "rollout", Edge: EdgeStart},
		Event{Kind: KindScrape, Target: b, Body: body("<html>oops</html>")},
		Event{Kind: KindPhase, Phase: "rollout", Edge: EdgeEnd},
		Event{Kind: KindGap, Since: t0, Events: 3},
		Event{Kind: KindStep, Step: 4},
		Event{Kind: KindRemove, Target: a},
		Event{Kind: KindRemove, Target: b},
		Event{Kind: KindScrape, Target: a, Body: body(page)},
		Event{Kind: KindRemove, Target: a},
	)
	log := &callLog{t0: t0}
	var kinds, bad []string
	var steps []int64
	err := Replay(NewReader(strings.NewReader(in)), log, ReplayOptions{
		OnEvent:   func(e *Event) { kinds = append(kinds, e.Kind) },
		OnBadPage: func(e *Event, err error) { bad = append(bad, e.Target) },
		OnStep:    func(r *step.Record) error { steps = append(steps, r.Step); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"begin 0",
		"labels " + a + " {team=x,zone=z}",
		"added " + b,
		"observe 3 " + a + " engines=2",
		"observe 4 " + b + " err=connection refused",
		"observe 5 " + b + " refused err=dial tcp: connect: connection refused",
		"phase start rollout 6",
		"observe 7 " + b + " err=" + errorOf(t, "<html>oops</html>"),
		"phase end rollout 8",
		"end step 4 10",
		"forget " + a + "," + b,
		"observe 13 " + a + " engines=2",
		"forget " + a,
	}
	if !slices.Equal(log.calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(log.calls, "\n"), strings.Join(want, "\n"))
	}
	if len(kinds) != 15 || kinds[9] != KindGap {
		t.Errorf("OnEvent told of %q, want all 15 events, the gap 10th", kinds)
	}
	if !slices.Equal(bad, []string{b}) || !slices.Equal(steps, []int64{4}) {
		t.Errorf("bad pages %q, steps %v; want %s's page and step 4", bad, steps, b)
	}
}

// errorOf is the parse error of a page that is not Prometheus text.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	_, err := page.ParsePage([]byte(body))
	if err == nil {
		t.Fatalf("%q parses", body)
	}
	return err.Error()
}

// TestReplayStops: a phase that is no phase name stops replay with its line, after the events
// before it; an error of OnStep stops it with that error; a read error is the reader's.
func TestReplayStops(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	log := &callLog{t0: t0}
	in := recording(t0, Event{Kind: KindStart}, Event{Kind: KindPhase, Phase: "Rollout", Edge: EdgeStart}, Event{Kind: KindStep, Step: 1})
	err := Replay(NewReader(strings.NewReader(in)), log, ReplayOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: phase name \"Rollout\"") {
		t.Errorf("invalid phase: %v, want it named with its line", err)
	}
	if !slices.Equal(log.calls, []string{"begin 0"}) {
		t.Errorf("calls %q, want only those before the bad phase", log.calls)
	}

	full := errors.New("disk full")
	in = recording(t0, Event{Kind: KindStep, Step: 1}, Event{Kind: KindStep, Step: 2})
	log = &callLog{t0: t0}
	err = Replay(NewReader(strings.NewReader(in)), log, ReplayOptions{OnStep: func(*step.Record) error { return full }})
	if !errors.Is(err, full) || len(log.calls) != 1 {
		t.Errorf("OnStep failing: %v after %q, want its error after the first step", err, log.calls)
	}

	err = Replay(NewReader(strings.NewReader(in+"{oops\n")), &callLog{t0: t0}, ReplayOptions{})
	if err == nil || !strings.Contains(err.Error(), "line 3: not a valid event") {
		t.Errorf("bad line: %v", err)
	}
}
