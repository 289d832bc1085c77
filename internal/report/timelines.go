package report

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// seriesInfo labels a timeline series in the page: the spec's title and unit, and whether its
// values are fractions. The page lists the series in this order.
type seriesInfo struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Unit  string `json:"unit"`
	Frac  bool   `json:"frac,omitempty"`
}

// timelineSeries describes the series a timeline may hold, as package vllm titles them.
func timelineSeries() []seriesInfo {
	var out []seriesInfo
	for _, s := range vllm.TimelineSeries() {
		out = append(out, seriesInfo{Name: s.Name, Title: s.Title, Unit: s.Unit, Frac: s.Fraction})
	}
	return out
}

// sameStart is how far a timeline file's start may be from its step record's and still be the
// timeline of that step: the two are written from one time, so only a rounding of it.
const sameStart = time.Millisecond

// addTimelines embeds the timelines of the steps in recs into d: of the timeline files under
// the run folder, only those of steps that recs hold and that started when the step did (a run
// written into the folder of an earlier one leaves the earlier files of other step numbers, or
// of steps it did not write a timeline for). The latest opt.TimelineSteps of them are embedded,
// with per-worker rows as far as opt.WorkerBytes allows. Every worker gets a colour index of
// its own, the same in every step.
func addTimelines(d *pageData, recs []*step.Record, src timelineSource, opt Options) error {
	files, err := src.steps()
	if err != nil {
		return err
	}
	starts := make(map[int64][]time.Time, len(recs))
	for _, r := range recs {
		starts[r.Step] = append(starts[r.Step], r.Start)
	}
	var steps []int64
	foreign := 0
	for _, n := range files {
		if _, ok := starts[n]; ok {
			steps = append(steps, n)
		} else {
			foreign++
		}
	}
	d.TimelineFiles = len(steps)
	if len(steps) > opt.TimelineSteps {
		d.Notes = append(d.Notes, fmt.Sprintf("Timelines are embedded for the latest %d of %d steps; older steps have theirs in timelines/step_NNNNNN.json.", opt.TimelineSteps, len(steps)))
		steps = steps[len(steps)-opt.TimelineSteps:]
	}
	budget := opt.WorkerBytes
	banded := 0
	var embedded []*stepTimeline
	for i := len(steps) - 1; i >= 0; i-- {
		n := steps[i]
		st, err := src.digest(n)
		if err != nil {
			d.Notes = append(d.Notes, fmt.Sprintf("Step %d: %v", n, err))
			continue
		}
		if !slices.ContainsFunc(starts[n], func(t time.Time) bool { return st.start.Sub(t).Abs() < sameStart }) {
			foreign++
			d.TimelineFiles--
			continue
		}
		// A copy, so that the cached digest keeps its rows for the next build.
		c := *st
		c.Series = make(map[string]*seriesDigest, len(st.Series))
		size := 0
		for _, name := range st.order {
			size += len(st.rows[name])
		}
		for name, sd := range st.Series {
			s := *sd
			if size <= budget {
				s.Rows = st.rows[name]
			}
			c.Series[name] = &s
		}
		if size <= budget {
			budget -= size
		} else {
			banded++
		}
		d.Timelines[strconv.FormatInt(n, 10)] = &c
		embedded = append(embedded, &c)
	}
	if banded > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("Per-worker timelines are embedded for the latest steps up to %d MiB; %d older steps show the fleet's band only.", opt.WorkerBytes>>20, banded))
	}
	if foreign > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d timeline files in timelines/ are not of the steps in steps.jsonl (an earlier run's in the same folder?) and are left out.", foreign))
	}
	colorWorkers(embedded)
	return nil
}

// colorWorkers gives every worker of the timelines a colour index: its place among all the
// workers of the timelines, in the order of step.WorkerID, so that a worker has one colour in
// every chart of every step.
func colorWorkers(ts []*stepTimeline) {
	seen := map[step.WorkerID]bool{}
	var all []step.WorkerID
	for _, t := range ts {
		for _, id := range t.ids {
			if !seen[id] {
				seen[id] = true
				all = append(all, id)
			}
		}
	}
	slices.SortFunc(all, func(a, b step.WorkerID) int { return a.Compare(b) })
	index := make(map[step.WorkerID]int, len(all))
	for i, id := range all {
		index[id] = i
	}
	for _, t := range ts {
		t.Colors = make([]int, len(t.ids))
		for i, id := range t.ids {
			t.Colors[i] = index[id]
		}
	}
}
