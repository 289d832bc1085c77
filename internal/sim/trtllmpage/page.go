package trtllmpage

import (
	"slices"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// What the page is made of, from TensorRT-LLM's code (tensorrt_llm/metrics/collector.py and
// tensorrt_llm/serve/openai_server.py):
//
//   - trtllm-serve with return_perf_metrics builds a MetricsCollector labelled
//     {model_name: the served model, engine_type: the backend, "pytorch" by default} and serves
//     a registry holding prometheus_client's MultiProcessCollector alone (its HTTP
//     instrumentation is off unless ENABLE_METRICS is set) at /prometheus/metrics;
//   - a family shows once it has a child: a labelled metric has none until .labels() made one,
//     which the collector does when it logs a value. prompt_cached_tokens_total is made in
//     MetricsCollector's constructor, the *_config_info gauges at start (log_config_info), the
//     per-request families at the first finished request that has their value, and the
//     iteration families at the first iteration statistics logged, which a finished request
//     triggers;
//   - the multiprocess collector lists the families file by file (counter, gauge, histogram, as
//     their files are listed) and, within a file, in the order their first child was written;
//     it writes no _created samples, labels every gauge sample with the writing process's pid
//     (Gauge's default multiprocess mode "all"), and lists a histogram's _sum before its
//     buckets and _count.
//
// A server runs one engine (Config.Validate refuses dp above 1 for trtllm), whose figures the
// page shows.

// engineType is trtllm-serve's engine_type label: the LLM args' backend, "pytorch" by default.
const engineType = "pytorch"

// gpuType and gpuMemoryUsed are the simulated GPU's name (model_config_info's gpu_type, from
// torch.cuda.get_device_name) and its memory in use: the executor reports total minus free
// memory, which a KV pool sized at start from the free memory keeps about constant.
const (
	gpuType       = "NVIDIA H100 80GB HBM3"
	gpuMemoryUsed = 76_000_000_000
)

// renderer writes one server's page in trtllm-serve's layout.
type renderer struct {
	model       string
	maxModelLen int
	maxActive   int // max_num_active_requests: the engine's running batch cap
	maxBlocks   int // the KV pool's blocks
	les         struct{ phase, ttft, tpot, prefill, cached, batch []string }
}

// NewTRTLLMPageWriter returns the writer of cfg's servers' pages.
func NewTRTLLMPageWriter(cfg fleetconfig.Config) snap.PageRenderer {
	r := &renderer{model: cfg.Model, maxModelLen: cfg.MaxModelLen, maxActive: cfg.MaxNumSeqs, maxBlocks: cfg.BlocksPerEngine}
	b := &snap.TrtllmBuckets
	r.les.phase = promtext.LeStrings(b.Phase)
	r.les.ttft = promtext.LeStrings(b.Ttft)
	r.les.tpot = promtext.LeStrings(b.Tpot)
	r.les.prefill = promtext.LeStrings(b.Prefill)
	r.les.cached = promtext.LeStrings(b.CachedTokens)
	r.les.batch = promtext.LeStrings(b.BatchTokens)
	return r
}

// labels are the collector's labels, on every series.
func (r *renderer) labels() promtext.LabelSet {
	var ls promtext.LabelSet
	ls.Add("engine_type", engineType)
	ls.Add("model_name", r.model)
	return ls
}

// family is one family of the page: created says whether it has a child yet and the number
// of the log that made it (0 for one made at start), which orders a file's families; write
// writes its samples.
type family struct {
	name, help string
	created    func(t *snap.TrtllmStats) (uint64, bool)
	write      func(dst []byte, name string, e *snap.EngineStats, st *snap.PageState) []byte
}

// atStart is the creation of a family made when the server starts.
func atStart(*snap.TrtllmStats) (uint64, bool) { return 0, true }

// at is the creation of a family made at the log first numbers.
func at(first func(t *snap.TrtllmStats) uint64) func(t *snap.TrtllmStats) (uint64, bool) {
	return func(t *snap.TrtllmStats) (uint64, bool) {
		n := first(t)
		return n, n > 0
	}
}

func (r *renderer) Render(dst []byte, st *snap.PageState) []byte {
	if len(st.Engines) == 0 {
		return dst
	}
	e := &st.Engines[0]
	dst = r.appendFile(dst, "counter", r.counters(), e, st)
	dst = r.appendFile(dst, "gauge", r.gauges(), e, st)
	return r.appendFile(dst, "histogram", r.histograms(), e, st)
}

// appendFile writes the families of one type that have a child, in the order they were made
// (families made by the same log in the collector's order, which is the list's).
func (r *renderer) appendFile(dst []byte, typ string, fams []family, e *snap.EngineStats, st *snap.PageState) []byte {
	type made struct {
		f   *family
		seq uint64
		idx int
	}
	var list []made
	for i := range fams {
		if seq, ok := fams[i].created(&e.Trt); ok {
			list = append(list, made{&fams[i], seq, i})
		}
	}
	slices.SortStableFunc(list, func(a, b made) int {
		if a.seq != b.seq {
			if a.seq < b.seq {
				return -1
			}
			return 1
		}
		return a.idx - b.idx
	})
	for _, m := range list {
		name := "trtllm_" + m.f.name
		if typ == "counter" {
			name += "_total"
		}
		dst = promtext.AppendHelp(dst, name, m.f.help, typ)
		dst = m.f.write(dst, name, e, st)
	}
	return dst
}

// pid is the server process's pid, which labels its gauges; a restart is a new process.
func pid(st *snap.PageState) string { return strconv.Itoa(3000 + st.Restarts) }

func (r *renderer) counter(v func(t *snap.TrtllmStats) float64) func([]byte, string, *snap.EngineStats, *snap.PageState) []byte {
	return func(dst []byte, name string, e *snap.EngineStats, _ *snap.PageState) []byte {
		ls := r.labels()
		return promtext.AppendSample(dst, name, "", &ls, "", v(&e.Trt))
	}
}

func (r *renderer) counters() []family {
	return []family{
		{"prompt_cached_tokens", "Process-lifetime total prompt tokens served from KV cache. Resets only when the serving process " +
			"restarts, not when the KV cache is flushed or evicted.", atStart,
			r.counter(func(t *snap.TrtllmStats) float64 { return float64(t.Cached) })},
		{"request_success", "Count of successfully processed requests.", func(t *snap.TrtllmStats) (uint64, bool) {
			var first uint64
			for _, n := range t.First.Reason {
				if n > 0 && (first == 0 || n < first) {
					first = n
				}
			}
			return first, first > 0
		}, r.writeSuccess},
		{"prompt_tokens", "Cumulative number of prompt (input) tokens processed.", at(func(t *snap.TrtllmStats) uint64 { return t.First.Prompt }),
			r.counter(func(t *snap.TrtllmStats) float64 { return float64(t.Prompt) })},
		{"generation_tokens", "Cumulative number of generation (output) tokens produced.", at(func(t *snap.TrtllmStats) uint64 { return t.First.Generation }),
			r.counter(func(t *snap.TrtllmStats) float64 { return float64(t.Generation) })},
		{"num_requests_completed", "Total number of completed requests across iterations", at(func(t *snap.TrtllmStats) uint64 { return t.First.Completed }),
			r.counter(func(t *snap.TrtllmStats) float64 { return float64(t.Completed) })},
		{"kv_cache_reused_blocks", "Cumulative number of KV cache blocks reused (cache hits)", at(func(t *snap.TrtllmStats) uint64 { return t.First.Reused }),
			r.counter(func(t *snap.TrtllmStats) float64 { return float64(t.Logged.ReusedBlocks) })},
		{"kv_cache_missed_blocks", "Cumulative number of KV cache blocks missed (cache misses)", at(func(t *snap.TrtllmStats) uint64 { return t.First.Missed }),
			r.counter(func(t *snap.TrtllmStats) float64 { return float64(t.Logged.MissedBlocks) })},
	}
}

// writeSuccess writes request_success's children in the order their reasons first finished a
// request.
func (r *renderer) writeSuccess(dst []byte, name string, e *snap.EngineStats, _ *snap.PageState) []byte {
	t := &e.Trt
	var reasons []int
	for i, n := range t.First.Reason {
		if n > 0 {
			reasons = append(reasons, i)
		}
	}
	slices.SortFunc(reasons, func(a, b int) int { return int(t.First.Reason[a]) - int(t.First.Reason[b]) })
	for _, i := range reasons {
		ls := r.labels()
		ls.Add("finished_reason", snap.TrtllmReasonNames[i])
		dst = promtext.AppendSample(dst, name, "", &ls, "", float64(t.Success[i]))
	}
	return dst
}
