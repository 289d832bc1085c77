package collector

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/record"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestPhasesLiveAndReplayed drives phase edges through the collector: each takes a boundary
// scrape, so the phase gets exactly the increases observed while it was open; a phase open at a
// step end goes on in the next step; and the recording replays to the same records.
func TestPhasesLiveAndReplayed(t *testing.T) {
	s := newValueServer(t, 100)
	path := filepath.Join(t.TempDir(), "rec.jsonl")
	rw, err := record.Create(path, record.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), Recorder: rw, NoFinalStep: true})
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return s.n.Load() >= 1 })
	phase := func(start bool, name string) PhaseEdge {
		t.Helper()
		f := c.EndPhase
		if start {
			f = c.StartPhase
		}
		e, err := f(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	var live []step.Record
	s.value.Store(110) // before the rollout: outside any phase
	phase(true, "rollout")
	s.value.Store(150) // 40 in the rollout
	if e := phase(true, "eval"); e.Ended != "rollout" || e.Edge != "start" {
		t.Errorf("eval's start = %+v, want it to end rollout", e)
	}
	s.value.Store(157) // 7 in eval
	phase(false, "eval")
	s.value.Store(160) // 3 outside
	phase(true, "rollout")
	s.value.Store(200) // 40 more in the rollout
	endStep(t, c, 1, &live)
	s.value.Store(205) // 5 in step 2's rollout: it goes on
	if _, err := c.EndPhase(ctx, "eval"); !errors.Is(err, ErrPhaseNotOpen) {
		t.Errorf("end of a phase that is not open: %v", err)
	}
	if _, err := c.StartPhase(ctx, "Bad"); !errors.Is(err, ErrPhaseName) {
		t.Errorf("bad name: %v", err)
	}
	phase(false, "rollout")
	s.value.Store(206)
	endStep(t, c, 2, &live)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	r1, r2 := live[0], live[1]
	const k = "vllm/generation_tokens"
	if r1.Metrics[k] != 100 || r1.Phases["rollout"].Metrics[k] != 80 || r1.Phases["eval"].Metrics[k] != 7 || r1.Phases["rollout"].Intervals != 2 {
		t.Errorf("step 1: %v tokens, rollout %+v, eval %+v; want 100, 80 in 2 runs, 7", r1.Metrics[k], r1.Phases["rollout"], r1.Phases["eval"])
	}
	if r2.Metrics[k] != 6 || r2.Phases["rollout"].Metrics[k] != 5 || r2.Phases["eval"] != nil {
		t.Errorf("step 2: %v tokens, phases %v; want 6, rollout 5", r2.Metrics[k], r2.Phases)
	}
	replayed := replayRecording(t, path, step.Options{})
	if len(replayed) != len(live) {
		t.Fatalf("replayed %d steps, live %d", len(replayed), len(live))
	}
	for i := range live {
		a, _ := step.MarshalLine(&live[i])
		b, _ := step.MarshalLine(&replayed[i])
		if string(a) != string(b) {
			t.Errorf("step %d differs:\nlive   %s\nreplay %s", live[i].Step, a, b)
		}
	}
}

// TestAddTargetsWaitsForTheFirstScrape: a registration returns once its target's baseline was
// taken, without waiting for a tick (the fake clock never ticks here), so that what its engine
// counts after the call is counted.
func TestAddTargetsWaitsForTheFirstScrape(t *testing.T) {
	s := newValueServer(t, 100)
	c, _, stop := start(t, Options{NoFinalStep: true})
	defer stop()
	if err := c.AddTargets(context.Background(), targets(s.srv.URL)); err != nil {
		t.Fatal(err)
	}
	if n := s.n.Load(); n != 1 {
		t.Fatalf("AddTargets returned after %d scrapes of the new target, want its first", n)
	}
	s.value.Store(4100)
	r, err := c.EndStep(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Metrics["vllm/generation_tokens"]; got != 4000 {
		t.Fatalf("step 1 counted %v tokens, want the 4000 counted after registration", got)
	}
}

// TestResumeContinuesTheStepAxis: a run that continues an out_dir's steps refuses step numbers
// up to the last one, naming it, and numbers timer steps after it.
func TestResumeContinuesTheStepAxis(t *testing.T) {
	s := newValueServer(t, 100)
	c, _, stop := start(t, Options{Targets: targets(s.srv.URL), Resume: true, ResumeAfter: 7, NoFinalStep: true})
	defer stop()
	_, err := c.EndStep(context.Background(), 7)
	if !errors.Is(err, ErrStepOrder) || !strings.Contains(err.Error(), "ends at step 7") {
		t.Fatalf("EndStep(7) after a run that ended at 7: %v", err)
	}
	if r, err := c.EndStep(context.Background(), 8); err != nil || r.Step != 8 {
		t.Fatalf("EndStep(8) = %v, %v", r.Step, err)
	}
}

// TestUndatedCountsOfALateTarget: a target added during the run whose first page already has
// counts without _created cannot be made exact; its state says so (once, in /v1/live), and a
// target there from the start, or with _created, does not.
func TestUndatedCountsOfALateTarget(t *testing.T) {
	static := newValueServer(t, 500)
	late := newValueServer(t, 4000)
	dated := newValueServer(t, 4000)
	dated.created.Store(1)
	c, _, stop := start(t, Options{Targets: targets(static.srv.URL), NoFinalStep: true})
	defer stop()
	ctx := context.Background()
	testkit.WaitFor(t, 5*time.Second, "the scrape at start", func() bool { return static.n.Load() >= 1 })
	if err := c.AddTargets(ctx, targets(late.srv.URL, dated.srv.URL)); err != nil {
		t.Fatal(err)
	}
	_, ts, err := c.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	for _, s := range ts {
		notes[s.URL] = s.Note
	}
	if notes[late.srv.URL] != undatedNote || notes[static.srv.URL] != "" || notes[dated.srv.URL] != "" {
		t.Fatalf("notes %v: want only the late target without _created noted", notes)
	}
}
