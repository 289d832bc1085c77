package sglangpage

import (
	"slices"

	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

var sglangTokenLes = promtext.LeStrings(snap.SglangTokenBuckets)

// appendMoreScheduler writes the scheduler's families of these, one series per engine.
func (r *sglangRenderer) appendMoreScheduler(dst []byte, st *snap.PageState) []byte {
	gauge := func(name, help string, v func(i int) int) {
		dst = promtext.AppendHelp(dst, "sglang:"+name, help, "gauge")
		for i := range st.Engines {
			ls := r.schedulerLabels(i)
			dst = promtext.AppendSample(dst, "sglang:"+name, "", &ls, "", float64(v(i)))
		}
	}
	logged := func(i int) *snap.SglangGauges { return &st.Engines[i].Sg.Logged }
	gauge("kv_available_tokens", "Number of free token slots in the KV cache pool.", func(i int) int { return logged(i).KvAvailable })
	gauge("kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool.",
		func(i int) int { return logged(i).KvEvictable })
	gauge("kv_used_tokens", "Number of actively used token slots in the KV cache pool.", func(i int) int { return logged(i).UsedTokens })
	gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", func(int) int { return r.maxTotal })
	counter := func(name, help string, v func(i int) int64) {
		dst = promtext.AppendHelp(dst, "sglang:"+name+"_total", help, "counter")
		for i := range st.Engines {
			if st.Engines[i].Preemptions == 0 {
				continue // the engine's series comes with its first retraction
			}
			ls := r.schedulerLabels(i)
			dst = promtext.AppendSample(dst, "sglang:"+name, "_total", &ls, "", float64(v(i)))
		}
	}
	more := func(i int) *snap.SglangMore { return &st.Engines[i].Sg.More }
	if slices.ContainsFunc(st.Engines, func(e snap.EngineStats) bool { return e.Preemptions > 0 }) {
		counter("num_retracted_input_tokens", "Total number of retracted input tokens.", func(i int) int64 { return more(i).RetractedIn })
		counter("num_retracted_output_tokens", "Total number of retracted output tokens.", func(i int) int64 { return more(i).RetractedOut })
	}
	for _, c := range []struct {
		name, help string
		v          func(s *snap.ShapeStats) float64
	}{
		{"estimated_flops_per_gpu", "Estimated number of floating point operations per GPU (for Model FLOPs Utilization calculations).",
			func(s *snap.ShapeStats) float64 { return s.Flops }},
		{"estimated_read_bytes_per_gpu", "Estimated number of bytes read from memory per GPU (for Model FLOPs Utilization calculations).",
			func(s *snap.ShapeStats) float64 { return s.ReadBytes }},
		{"estimated_write_bytes_per_gpu", "Estimated number of bytes written to memory per GPU (for Model FLOPs Utilization calculations).",
			func(s *snap.ShapeStats) float64 { return s.WriteBytes }},
	} {
		help := false
		for i := range st.Engines {
			v := c.v(&st.Engines[i].Shape)
			if v <= 0 {
				continue
			}
			if !help {
				dst = promtext.AppendHelp(dst, "sglang:"+c.name+"_total", c.help, "counter")
				help = true
			}
			ls := r.schedulerLabels(i)
			dst = promtext.AppendSample(dst, "sglang:"+c.name, "_total", &ls, "", v)
		}
	}
	dst = promtext.AppendHelp(dst, "sglang:prefill_effective_tokens_total", "Effective prefill tokens with retracted-request re-counts "+
		"excluded, updated on each log interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit "+
		"rate = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.", "counter")
	for i := range st.Engines {
		for j, mode := range snap.SglangEffectiveModes {
			ls := r.schedulerLabels(i)
			ls.Add("mode", mode)
			dst = promtext.AppendSample(dst, "sglang:prefill_effective_tokens", "_total", &ls, "", float64(more(i).Effective[j]))
		}
	}
	return dst
}

// appendMoreTokenizer writes the tokenizer's families of these, from the first finished request
// (the verify calls from the first that had one).
func (r *sglangRenderer) appendMoreTokenizer(dst []byte, tok *snap.SglangStats, tl *promtext.LabelSet) []byte {
	m := &tok.More
	if m.VerifyCalls > 0 {
		dst = promtext.AppendHelp(dst, "sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.", "counter")
		dst = promtext.AppendSample(dst, "sglang:spec_verify_calls", "_total", tl, "", float64(m.VerifyCalls))
	}
	if tok.Requests > 0 {
		dst = promtext.AppendHelp(dst, "sglang:prompt_tokens_histogram", "Histogram of prompt token length.", "histogram")
		dst = promtext.AppendMultiprocessHistogram(dst, "sglang:prompt_tokens_histogram", tl, sglangTokenLes, &m.PromptLen)
		dst = promtext.AppendHelp(dst, "sglang:generation_tokens_histogram", "Histogram of generation token length.", "histogram")
		dst = promtext.AppendMultiprocessHistogram(dst, "sglang:generation_tokens_histogram", tl, sglangTokenLes, &m.GenLen)
	}
	return dst
}
