package vllmpage

import (
	"slices"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// The families of a vLLM 0.20 fleet that syncs weights (Config.syncsWeights): vLLM's sleep
// resource state and fully-awake gauges, whose children for an engine appear with its first
// sleep-state snapshot (its first sleep or pause), and the RL families of its dev-mode server
// (VLLM_SERVER_DEV_MODE=1, vllm/entrypoints/serve/dev/rlhf/metrics.py), labelled by engine
// only, whose children appear with the engine's first weight load. prometheus_client lists a
// family's children in the order they were created, so engines are listed in the order their
// children appeared.

// sleepResources are the resource and state label values of engine_sleep_resource_state, in
// the order vLLM creates an engine's children.
var sleepResources = []struct {
	resource, state string
	on              func(r snap.Resources) bool
}{
	{"scheduler", "running", func(r snap.Resources) bool { return !r.Paused }},
	{"scheduler", "paused", func(r snap.Resources) bool { return r.Paused }},
	{"weights", "resident", func(r snap.Resources) bool { return r.Weights == snap.WeightsResident }},
	{"weights", "offloaded", func(r snap.Resources) bool { return r.Weights == snap.WeightsOffloaded }},
	{"weights", "discarded", func(r snap.Resources) bool { return r.Weights == snap.WeightsDiscarded }},
	{"weights", "unknown", func(snap.Resources) bool { return false }},
	{"kv_cache", "resident", func(r snap.Resources) bool { return r.Kv == snap.KvResident }},
	{"kv_cache", "released", func(r snap.Resources) bool { return r.Kv == snap.KvReleased }},
	{"kv_cache", "unknown", func(snap.Resources) bool { return false }},
}

// The HELP texts of the two sleep resource families say what vLLM's design document says of
// them; no captured page of a release with them was at hand.
var (
	famSleepResources = family{
		name: "vllm:engine_sleep_resource_state",
		help: "Engine sleep resource state; 1 for the current state of each resource (scheduler, weights, kv_cache), 0 for its other states.",
		kind: famCustom, write: (*renderer).appendSleepResources,
	}
	famFullyAwake = family{
		name: "vllm:engine_fully_awake",
		help: "Engine fully awake; 1 when scheduling is running and the weights and the KV cache are resident, 0 otherwise.",
		kind: famCustom, write: (*renderer).appendFullyAwake,
	}
	// rlFamilies are the dev-mode RL families, in the order metrics.py registers them, with its
	// HELP texts.
	rlFamilies = []family{
		{name: "vllm:rl_weight_update", help: "Number of completed weight update cycles (finish_weight_update calls).",
			kind: famCustom, write: (*renderer).appendRLUpdates},
		{name: "vllm:rl_weight_update_duration_seconds", help: "Wall-clock seconds from start_weight_update to finish_weight_update.",
			kind: famCustom, write: (*renderer).appendRLDuration},
		{name: "vllm:rl_weight_gen", help: "Current weight generation counter (auto-incremented by finish_weight_update).",
			kind: famCustom, write: (*renderer).appendRLGen},
		{name: "vllm:rl_weight_update_active", help: "1 while a weight update is in progress (between start and finish), 0 otherwise.",
			kind: famCustom, write: (*renderer).appendRLActive},
	}
)

// childOrder returns the indexes of the engines whose child exists (has), ordered by the time
// it appeared (at), then by index.
func childOrder(st *snap.PageState, has func(*snap.EngineStats) bool, at func(*snap.EngineStats) time.Duration) []int {
	var idx []int
	for i := range st.Engines {
		if has(&st.Engines[i]) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(at(&st.Engines[a]) - at(&st.Engines[b])) })
	return idx
}

func snapshotOrder(st *snap.PageState) []int {
	return childOrder(st, func(s *snap.EngineStats) bool { return s.Snapshot }, func(s *snap.EngineStats) time.Duration { return s.SnapshotAt })
}

func (r *renderer) appendSleepResources(dst []byte, f *family, st *snap.PageState) []byte {
	dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
	for _, i := range snapshotOrder(st) {
		for _, rs := range sleepResources {
			ls := r.engineLabels(i)
			ls.Add("resource", rs.resource)
			ls.Add("state", rs.state)
			dst = promtext.AppendSample(dst, f.name, "", &ls, "", boolValue(rs.on(st.Engines[i].Res)))
		}
	}
	return dst
}

func (r *renderer) appendFullyAwake(dst []byte, f *family, st *snap.PageState) []byte {
	dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
	for _, i := range snapshotOrder(st) {
		ls := r.engineLabels(i)
		dst = promtext.AppendSample(dst, f.name, "", &ls, "", boolValue(st.Engines[i].Res.FullyAwake()))
	}
	return dst
}

// rlLabels are the labels of engine i's RL children: the engine alone.
func (r *renderer) rlLabels(i int) promtext.LabelSet {
	var ls promtext.LabelSet
	ls.Add("engine", r.engines[i])
	return ls
}

func finishedOrder(st *snap.PageState) []int {
	return childOrder(st, func(s *snap.EngineStats) bool { return s.Rl.Finished }, func(s *snap.EngineStats) time.Duration { return s.Rl.FinishedAt })
}

func (r *renderer) appendRLUpdates(dst []byte, f *family, st *snap.PageState) []byte {
	dst = promtext.AppendHelp(dst, f.name+"_total", f.help, "counter")
	order := finishedOrder(st)
	for _, i := range order {
		ls := r.rlLabels(i)
		dst = promtext.AppendSample(dst, f.name, "_total", &ls, "", float64(st.Engines[i].Rl.Updates))
	}
	return r.appendRLCreated(dst, f, st, order)
}

// appendRLCreated writes the _created gauge of an RL family's children, which appear at their
// engine's first finished weight update (order).
func (r *renderer) appendRLCreated(dst []byte, f *family, st *snap.PageState, order []int) []byte {
	if len(order) == 0 {
		return dst
	}
	dst = promtext.AppendHelp(dst, f.name+"_created", f.help, "gauge")
	for _, i := range order {
		ls := r.rlLabels(i)
		dst = promtext.AppendSample(dst, f.name, "_created", &ls, "", st.UnixOf(st.Engines[i].Rl.FinishedAt))
	}
	return dst
}

func (r *renderer) appendRLDuration(dst []byte, f *family, st *snap.PageState) []byte {
	dst = promtext.AppendHelp(dst, f.name, f.help, "histogram")
	order := finishedOrder(st)
	for _, i := range order {
		ls := r.rlLabels(i)
		h := &st.Engines[i].Rl.Duration
		dst = promtext.AppendHistogramChild(dst, f.name, &ls, r.rlLes, h.Counts[:len(r.rlLes)], h.Sum)
	}
	return r.appendRLCreated(dst, f, st, order)
}

func (r *renderer) appendRLGen(dst []byte, f *family, st *snap.PageState) []byte {
	dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
	for _, i := range finishedOrder(st) {
		ls := r.rlLabels(i)
		dst = promtext.AppendSample(dst, f.name, "", &ls, "", float64(st.Engines[i].Rl.Updates))
	}
	return dst
}

func (r *renderer) appendRLActive(dst []byte, f *family, st *snap.PageState) []byte {
	dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
	order := childOrder(st, func(s *snap.EngineStats) bool { return s.Rl.Started }, func(s *snap.EngineStats) time.Duration { return s.Rl.StartedAt })
	for _, i := range order {
		ls := r.rlLabels(i)
		dst = promtext.AppendSample(dst, f.name, "", &ls, "", boolValue(st.Engines[i].Rl.Active))
	}
	return dst
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
