package report

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/step"
	"github.com/vllmstat/vllmstat/internal/timeline"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The fleet-balance keys of a step record, without their prefix: how long the fleet was busy,
// how far the last worker trailed the others, how idle and how long asleep the workers were and
// how unevenly the work was shared. Records written before these keys existed have none of them, and the report
// then shows no fleet-balance group.
var balanceCharts = []string{
	step.NameStragglerTail,
	step.NameFleetBusy,
	step.NameWorkerIdle,
	step.NameWorkerAsleep,
	step.KeyImbalance,
	step.KeyWorstHitRate,
	step.KeyWorstPreemptions,
}

// isBalance reports whether a key (without prefix) belongs to the fleet-balance group: its
// chart is one of balanceCharts, or it is any other worst worker's value.
func isBalance(v vllm.Value) bool {
	return v.Stat == vllm.WorstWorker || slices.Contains(balanceCharts, chartOf(v))
}

// balanceLine is the part of a steps.jsonl line that names workers: the step's stragglers and
// its worst workers by some key, with their numbers kept as pointers so that a missing or
// non-finite one is shown as absent.
type balanceLine struct {
	Stragglers   []workerRef          `json:"stragglers"`
	WorstWorkers map[string]workerRef `json:"worst_workers"`
}

// workerRef names a worker in a record, with the number the record gives for it: a
// straggler's last_busy_s, a worst worker's value.
type workerRef struct {
	Target    string            `json:"target"`
	Engine    string            `json:"engine"`
	Labels    map[string]string `json:"labels,omitempty"`
	LastBusyS *float64          `json:"last_busy_s"`
	Value     *float64          `json:"value"`
}

func (w workerRef) label() string {
	return timeline.Label(step.WorkerID{Target: w.Target, Engine: w.Engine, Labels: page.LabelKey(w.Labels)})
}

// readBalance decodes the balance fields of one steps.jsonl line, nil when it has none. Only
// lines that mention them are decoded a second time, so that old runs read as fast as before.
func readBalance(line []byte) (*stepBalance, error) {
	if !bytes.Contains(line, []byte(`"stragglers"`)) && !bytes.Contains(line, []byte(`"worst_workers"`)) {
		return nil, nil
	}
	var bl balanceLine
	if err := json.Unmarshal(line, &bl); err != nil {
		return nil, err
	}
	b := &stepBalance{}
	for _, s := range bl.Stragglers {
		b.Stragglers = append(b.Stragglers, workerNote{Label: s.label(), Value: finiteOrNil(s.LastBusyS), Worker: -1})
	}
	for _, what := range slices.Sorted(maps.Keys(bl.WorstWorkers)) {
		w := bl.WorstWorkers[what]
		b.Worst = append(b.Worst, workerNote{What: what, Label: w.label(), Value: finiteOrNil(w.Value), Worker: -1})
	}
	if len(b.Stragglers) == 0 && len(b.Worst) == 0 {
		return nil, nil
	}
	return b, nil
}

func finiteOrNil(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r := round(*v)
	return &r
}

// stepBalance is what the step picker says about the balance of one step's fleet.
type stepBalance struct {
	// Stragglers are the workers busy well past the others, with their last-busy offsets.
	Stragglers []workerNote `json:"stragglers,omitempty"`
	// Worst are the worst workers by a key (What), with their values.
	Worst []workerNote `json:"worst,omitempty"`
}

// workerNote is one worker named in a stepBalance.
type workerNote struct {
	What  string   `json:"what,omitempty"`
	Label string   `json:"label"`
	Value *float64 `json:"value"`
	// Worker is the worker's row in the step's timeline, -1 when the page has no timeline of
	// the step or the timeline lacks the worker.
	Worker int `json:"w"`
}

// locate points each note of b at its worker's row in the timeline, by the workers' labels,
// which name a worker whether its target was written as a URL or as host:port.
func (b *stepBalance) locate(st *stepTimeline) *stepBalance {
	c := &stepBalance{Stragglers: slices.Clone(b.Stragglers), Worst: slices.Clone(b.Worst)}
	if st == nil {
		return c
	}
	rows := make(map[string]int, len(st.ids))
	for i, id := range st.ids {
		rows[timeline.Label(id)] = i
	}
	for _, notes := range [][]workerNote{c.Stragglers, c.Worst} {
		for i := range notes {
			if w, ok := rows[notes[i].Label]; ok {
				notes[i].Worker = w
			}
		}
	}
	return c
}
