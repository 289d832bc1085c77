package sglangpage

import (
	"slices"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// sglangRenderer writes one server's page in SGLang's layout.
type sglangRenderer struct {
	model    string
	dp       int
	priority bool // --enable-priority-scheduling (Config.Priority)
	maxTotal int  // an engine's KV pool in tokens, max_total_num_tokens
	// stageMetrics serves the scheduler's stage and idle seconds (Config.SGLangStageMetrics).
	stageMetrics bool
	les          struct{ ttft, itl, e2e, queue []string }
}

func newSGLangRenderer(model string, dp int, priority bool) *sglangRenderer {
	r := &sglangRenderer{model: model, dp: dp, priority: priority}
	r.les.ttft = promtext.LeStrings(snap.SglangBuckets.Ttft)
	r.les.itl = promtext.LeStrings(snap.SglangBuckets.Itl)
	r.les.e2e = promtext.LeStrings(snap.SglangBuckets.E2e)
	r.les.queue = promtext.LeStrings(snap.SglangBuckets.Queue)
	return r
}

// schedulerLabels are the labels of engine i's scheduler series (SchedulerMetricsCollector's
// init_new): dp_rank only with data parallelism, priority="" with priority scheduling; one
// scheduler per DP rank exports.
func (r *sglangRenderer) schedulerLabels(i int) promtext.LabelSet { return r.priorityLabels(i, "") }

// priorityLabels are engine i's scheduler labels with priority's value (one of a gauge's
// priorities, or "" for every series) when priority scheduling is on.
func (r *sglangRenderer) priorityLabels(i int, priority string) promtext.LabelSet {
	var ls promtext.LabelSet
	if r.priority {
		ls.Add("priority", priority)
	}
	if r.dp > 1 {
		ls.Add("dp_rank", strconv.Itoa(i))
	}
	ls.Add("engine_type", "unified")
	ls.Add("model_name", r.model)
	ls.Add("moe_ep_rank", "0")
	ls.Add("pp_rank", "0")
	ls.Add("tp_rank", "0")
	return ls
}

func (r *sglangRenderer) tokenizerLabels() promtext.LabelSet {
	var ls promtext.LabelSet
	ls.Add("engine_type", "unified")
	ls.Add("model_name", r.model)
	return ls
}

// sglangGaugeFamilies are the scheduler gauges a page shows, in SchedulerMetricsCollector's
// order, with its HELP texts; pid marks the ones without multiprocess_mode, which
// prometheus_client renders per process.
var sglangGaugeFamilies = []struct {
	name, help string
	pid        bool
	value      func(g *snap.SglangGauges) float64
	// byPriority gives a gauge's series per priority under priority scheduling: which it has
	// set, and their values.
	byPriority func(g *snap.SglangGauges) (has *[snap.NumPriorities]bool, v *[snap.NumPriorities]int)
}{
	{"num_running_reqs", "The number of running requests.", false, func(g *snap.SglangGauges) float64 { return float64(g.Running) },
		func(g *snap.SglangGauges) (*[snap.NumPriorities]bool, *[snap.NumPriorities]int) {
			return &g.HasRunning, &g.RunningBy
		}},
	{"num_used_tokens", "The number of used tokens.", false, func(g *snap.SglangGauges) float64 { return float64(g.UsedTokens) }, nil},
	{"token_usage", "The token usage.", false, func(g *snap.SglangGauges) float64 { return g.Usage }, nil},
	{"gen_throughput", "The generation throughput (token/s).", false, func(g *snap.SglangGauges) float64 { return g.GenThroughput }, nil},
	{"num_queue_reqs", "The number of requests in the waiting queue.", false, func(g *snap.SglangGauges) float64 { return float64(g.Queue) },
		func(g *snap.SglangGauges) (*[snap.NumPriorities]bool, *[snap.NumPriorities]int) {
			return &g.HasQueue, &g.QueueBy
		}},
	{"cache_hit_rate", "The prefix cache hit rate.", false, func(g *snap.SglangGauges) float64 { return g.CacheHitRate }, nil},
	{"spec_accept_length", "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).", false,
		func(g *snap.SglangGauges) float64 { return g.SpecLen }, nil},
	{"spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).", false,
		func(g *snap.SglangGauges) float64 { return g.SpecRate }, nil},
	{"num_retracted_reqs", "The number of retracted requests.", true, func(*snap.SglangGauges) float64 { return 0 }, nil},
	{"num_paused_reqs", "The number of paused requests by async weight sync.", true, func(g *snap.SglangGauges) float64 { return float64(g.Paused) }, nil},
}

func (r *sglangRenderer) Render(dst []byte, st *snap.PageState) []byte {
	// The tokenizer's families: the server's requests, summed over its engines.
	var tok snap.SglangStats
	for i := range st.Engines {
		tok.AddCounters(&st.Engines[i].Sg)
	}
	// SGLang creates a tokenizer series at its first observation (a multiprocess registry shows
	// a child once .labels() made it): the token and request counters and e2e at the first
	// finished request, TTFT at the first token, ITL at the first later output, cached tokens
	// at the first hit of each source, aborted requests at the first abort. The simulated requests are not streamed (an RL rollout's are not):
	// is_streaming="false" on the five families that carry it.
	tl := r.tokenizerLabels()
	sl := tl
	sl.Add("is_streaming", "false")
	counter := func(name string, ls *promtext.LabelSet, extra, value string, v float64) {
		all := *ls
		if extra != "" {
			all.Add(extra, value)
		}
		dst = promtext.AppendSample(dst, "sglang:"+name, "_total", &all, "", v)
	}
	if tok.Requests > 0 {
		dst = promtext.AppendHelp(dst, "sglang:prompt_tokens_total", "Number of prefill tokens processed.", "counter")
		counter("prompt_tokens", &sl, "", "", float64(tok.Prompt))
		dst = promtext.AppendHelp(dst, "sglang:generation_tokens_total", "Number of generation tokens processed.", "counter")
		counter("generation_tokens", &sl, "", "", float64(tok.Generation))
	}
	if tok.CachedDevice+tok.CachedHost > 0 {
		dst = promtext.AppendHelp(dst, "sglang:cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage).", "counter")
		if tok.CachedDevice > 0 {
			counter("cached_tokens", &tl, "cache_source", "device", float64(tok.CachedDevice))
		}
		if tok.CachedHost > 0 {
			counter("cached_tokens", &tl, "cache_source", "host", float64(tok.CachedHost))
		}
	}
	if tok.Requests > 0 {
		dst = promtext.AppendHelp(dst, "sglang:num_requests_total", "Number of requests processed.", "counter")
		counter("num_requests", &sl, "", "", float64(tok.Requests))
	}
	if tok.Aborted > 0 {
		dst = promtext.AppendHelp(dst, "sglang:num_aborted_requests_total", "Number of requests aborted.", "counter")
		counter("num_aborted_requests", &tl, "", "", float64(tok.Aborted))
	}

	// The schedulers' families, one series per engine (DP rank).
	pid := func(i int) string { return strconv.Itoa(2000 + 100*st.Restarts + i) }
	for _, f := range sglangGaugeFamilies {
		dst = promtext.AppendHelp(dst, "sglang:"+f.name, f.help, "gauge")
		for i := range st.Engines {
			ls := r.schedulerLabels(i)
			if f.pid {
				ls.Add("pid", pid(i))
			}
			g := &st.Engines[i].Sg.Logged
			dst = promtext.AppendSample(dst, "sglang:"+f.name, "", &ls, "", f.value(g))
			if !r.priority || f.byPriority == nil {
				continue
			}
			has, v := f.byPriority(g)
			for p := range snap.NumPriorities {
				if has[p] {
					pl := r.priorityLabels(i, strconv.Itoa(p))
					dst = promtext.AppendSample(dst, "sglang:"+f.name, "", &pl, "", float64(v[p]))
				}
			}
		}
	}
	dst = r.appendWeightLoad(dst, st)
	// The scheduler's counters show an engine's series from its first increment, as SGLang
	// creates a labelled child then: the retractions' at the first retraction, each mode of
	// realtime_tokens at its first tokens.
	if slices.ContainsFunc(st.Engines, func(e snap.EngineStats) bool { return e.Preemptions > 0 }) {
		dst = promtext.AppendHelp(dst, "sglang:num_retracted_requests_total", "Total number of retracted requests.", "counter")
		for i := range st.Engines {
			if st.Engines[i].Preemptions > 0 {
				ls := r.schedulerLabels(i)
				counter("num_retracted_requests", &ls, "", "", float64(st.Engines[i].Preemptions))
			}
		}
	}
	if slices.ContainsFunc(st.Engines, func(e snap.EngineStats) bool {
		return e.Sg.PrefillCompute+e.Sg.PrefillCache+e.Sg.Decode > 0
	}) {
		dst = promtext.AppendHelp(dst, "sglang:realtime_tokens_total",
			"Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.", "counter")
	}
	for i := range st.Engines {
		ls := r.schedulerLabels(i)
		s := &st.Engines[i].Sg
		for _, m := range []struct {
			mode string
			n    int64
		}{{"prefill_compute", s.PrefillCompute}, {"prefill_cache", s.PrefillCache}, {"decode", s.Decode}} {
			if m.n > 0 {
				counter("realtime_tokens", &ls, "mode", m.mode, float64(m.n))
			}
		}
	}
	dst = r.appendMoreScheduler(dst, st)
	if r.stageMetrics {
		dst = r.appendStages(dst, st)
	}
	dst = promtext.AppendHelp(dst, "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", "histogram")
	for i := range st.Engines {
		ls := r.schedulerLabels(i)
		dst = promtext.AppendMultiprocessHistogram(dst, "sglang:queue_time_seconds", &ls, r.les.queue, &st.Engines[i].Sg.Queue)
	}

	// The tokenizer's histograms.
	for _, h := range []struct {
		name, help string
		ls         *promtext.LabelSet
		les        []string
		h          *snap.Histogram
		seen       bool
	}{
		{"time_to_first_token_seconds", "Histogram of time to first token in seconds.", &sl, r.les.ttft, &tok.Ttft, tok.Ttft.Count > 0},
		{"inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &tl, r.les.itl, &tok.Itl, tok.Itl.Count > 0},
		{"e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", &sl, r.les.e2e, &tok.E2e, tok.Requests > 0},
	} {
		if h.seen {
			dst = promtext.AppendHelp(dst, "sglang:"+h.name, h.help, "histogram")
			dst = promtext.AppendMultiprocessHistogram(dst, "sglang:"+h.name, h.ls, h.les, h.h)
		}
	}
	return r.appendMoreTokenizer(dst, &tok, &tl)
}

// weightLoadHelp is SGLang's HELP text of weight_load_duration_seconds (SGLang PR #27363).
const weightLoadHelp = "Wall time of the most recent update_weights_from_<source> call on this scheduler rank (seconds). " +
	"`source` label is one of: disk, distributed, tensor, ipc. Event-detection via changes(...[<range>]) > 0 — no separate counter needed."

// appendWeightLoad writes weight_load_duration_seconds: one series per engine that has loaded
// weights, all from the trainer (source "distributed", update_weights_from_distributed). The
// multiprocess collector shows the family only once some scheduler has set it.
func (r *sglangRenderer) appendWeightLoad(dst []byte, st *snap.PageState) []byte {
	help := false
	for i := range st.Engines {
		sg := &st.Engines[i].Sg
		if !sg.WeightLoaded {
			continue
		}
		if !help {
			dst = promtext.AppendHelp(dst, "sglang:weight_load_duration_seconds", weightLoadHelp, "gauge")
			help = true
		}
		ls := r.schedulerLabels(i)
		ls.Add("source", "distributed")
		dst = promtext.AppendSample(dst, "sglang:weight_load_duration_seconds", "", &ls, "", sg.WeightLoad)
	}
	return dst
}

// appendStages writes the scheduler's stage and idle seconds. Each series shows from its first
// increment, as SGLang adds to a labelled child only time it counted (the HELP texts are this
// simulator's).
func (r *sglangRenderer) appendStages(dst []byte, st *snap.PageState) []byte {
	if slices.ContainsFunc(st.Engines, func(e snap.EngineStats) bool { return e.Sg.Idle > 0 }) {
		dst = promtext.AppendHelp(dst, "sglang:scheduler_idle_seconds_total", "Scheduler wall time with nothing to run, in seconds.", "counter")
		for i := range st.Engines {
			if v := st.Engines[i].Sg.Idle; v > 0 {
				ls := r.schedulerLabels(i)
				dst = promtext.AppendSample(dst, "sglang:scheduler_idle_seconds", "_total", &ls, "", v)
			}
		}
	}
	if slices.ContainsFunc(st.Engines, func(e snap.EngineStats) bool {
		return slices.ContainsFunc(e.Sg.Stage[:], func(v float64) bool { return v > 0 })
	}) {
		dst = promtext.AppendHelp(dst, "sglang:scheduler_stage_seconds_total", "Scheduler loop wall time by stage, in seconds.", "counter")
		for i := range st.Engines {
			for k, v := range st.Engines[i].Sg.Stage {
				if v > 0 {
					ls := r.schedulerLabels(i)
					ls.Add("category", snap.SglangStages[k])
					dst = promtext.AppendSample(dst, "sglang:scheduler_stage_seconds", "_total", &ls, "", v)
				}
			}
		}
	}
	return dst
}

// newSGLangPageWriter returns the writer of the pages of cfg's SGLang servers.
func NewSGLangPageWriter(cfg fleetconfig.Config) *sglangRenderer {
	r := newSGLangRenderer(cfg.Model, cfg.DP, cfg.Priority)
	r.maxTotal = cfg.BlocksPerEngine * snap.BlockSize
	r.stageMetrics = cfg.SGLangStageMetrics
	return r
}
