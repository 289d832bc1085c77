package vllmpage

import (
	"math"
	"strconv"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/promtext"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
)

// renderer writes one server's page in one vLLM version's layout. Everything that does not
// change between scrapes is prepared once.
type renderer struct {
	v         *version
	model     string
	numBlocks string
	les       map[string][]string
	httpLes   []string
	rlLes     []string
	engines   []string
}

func newRenderer(v *version, model string, b *snap.BucketSet, numBlocks, dp int) *renderer {
	r := &renderer{v: v, model: model, numBlocks: strconv.Itoa(numBlocks), les: map[string][]string{},
		httpLes: promtext.LeStrings(snap.HttpDurationBounds), rlLes: promtext.LeStrings(snap.RlDurationBounds)}
	for _, f := range v.families {
		if f.kind == famHistogram {
			r.les[f.buckets] = promtext.LeStrings(b.Bounds(f.buckets))
		}
	}
	for i := range dp {
		r.engines = append(r.engines, strconv.Itoa(i))
	}
	return r
}

// engineLabels returns the labels every child of engine i carries.
func (r *renderer) engineLabels(i int) promtext.LabelSet {
	var ls promtext.LabelSet
	if r.v.EngineLabel {
		ls.Add("engine", r.engines[i])
	}
	ls.Add("model_name", r.model)
	return ls
}

func (r *renderer) Render(dst []byte, st *snap.PageState) []byte {
	dst = r.appendProcess(dst, st)
	for i := range r.v.families {
		dst = r.appendFamily(dst, &r.v.families[i], st)
	}
	return r.appendHTTP(dst, st)
}

func (r *renderer) appendFamily(dst []byte, f *family, st *snap.PageState) []byte {
	switch f.kind {
	case famGauge:
		dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
		// A gauge with an extra label lists its children value by value, engine by engine.
		for j := range max(len(f.extraValues), 1) {
			for i := range st.Engines {
				ls := r.engineLabels(i)
				if f.extraLabel != "" {
					ls.Add(f.extraLabel, f.extraValues[j])
				}
				dst = promtext.AppendSample(dst, f.name, "", &ls, "", f.value(&st.Engines[i], j))
			}
		}
	case famCounter:
		dst = promtext.AppendHelp(dst, f.name+"_total", f.help, "counter")
		dst = r.counterChildren(dst, f, st, "_total", false)
		dst = promtext.AppendHelp(dst, f.name+"_created", f.help, "gauge")
		dst = r.counterChildren(dst, f, st, "_created", true)
	case famHistogram:
		dst = promtext.AppendHelp(dst, f.name, f.help, "histogram")
		les := r.les[f.buckets]
		for i := range st.Engines {
			ls := r.engineLabels(i)
			h := f.hist(&st.Engines[i])
			dst = promtext.AppendHistogramChild(dst, f.name, &ls, les, h.Counts[:len(les)], h.Sum)
		}
		dst = promtext.AppendHelp(dst, f.name+"_created", f.help, "gauge")
		for i := range st.Engines {
			ls := r.engineLabels(i)
			dst = promtext.AppendSample(dst, f.name, "_created", &ls, "", st.CreatedAt)
		}
	case famCustom:
		dst = f.write(r, dst, f, st)
	case famInfo:
		dst = promtext.AppendHelp(dst, f.name, f.help, "gauge")
		for i := range st.Engines {
			var ls promtext.LabelSet
			ls.Add("block_size", strconv.Itoa(snap.BlockSize))
			ls.Add("cache_dtype", "auto")
			ls.Add("enable_prefix_caching", "True")
			ls.Add("engine", r.engines[i])
			ls.Add("gpu_memory_utilization", "0.9")
			ls.Add("num_gpu_blocks", r.numBlocks)
			dst = promtext.AppendSample(dst, f.name, "", &ls, "", 1)
		}
	}
	return dst
}

func (r *renderer) counterChildren(dst []byte, f *family, st *snap.PageState, suffix string, created bool) []byte {
	n := max(len(f.extraValues), 1)
	for i := range st.Engines {
		for j := range n {
			ls := r.engineLabels(i)
			if f.extraLabel != "" {
				ls.Add(f.extraLabel, f.extraValues[j])
			}
			v := st.CreatedAt
			if !created {
				v = f.value(&st.Engines[i], j)
			}
			dst = promtext.AppendSample(dst, f.name, suffix, &ls, "", v)
		}
	}
	return dst
}

// appendProcess writes the process and Python families prometheus_client's default collectors
// add to every page, with values that grow with uptime the way an API server's would.
func (r *renderer) appendProcess(dst []byte, st *snap.PageState) []byte {
	var none promtext.LabelSet
	up := st.Uptime
	page := 4096.0
	dst = promtext.AppendHelp(dst, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge")
	dst = promtext.AppendSample(dst, "process_virtual_memory_bytes", "", &none, "", 15302094848+page*math.Floor(math.Min(up, 3600)*3))
	dst = promtext.AppendHelp(dst, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge")
	dst = promtext.AppendSample(dst, "process_resident_memory_bytes", "", &none, "", 1153433600+page*math.Floor(math.Min(up, 3600)*11))
	dst = promtext.AppendHelp(dst, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge")
	dst = promtext.AppendSample(dst, "process_start_time_seconds", "", &none, "", math.Round(st.CreatedAt*100)/100)
	// prometheus_client adds user and system time, each in clock ticks divided by 100.
	utime, stime := math.Floor(up*100*0.31)+412, math.Floor(up*100*0.04)+96
	dst = promtext.AppendHelp(dst, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter")
	dst = promtext.AppendSample(dst, "process_cpu_seconds_total", "", &none, "", utime/100+stime/100)
	dst = promtext.AppendHelp(dst, "process_open_fds", "Number of open file descriptors.", "gauge")
	dst = promtext.AppendSample(dst, "process_open_fds", "", &none, "", float64(58+4*len(st.Engines)))
	dst = promtext.AppendHelp(dst, "process_max_fds", "Maximum number of open file descriptors.", "gauge")
	dst = promtext.AppendSample(dst, "process_max_fds", "", &none, "", 1048576)

	py := r.v.python
	dst = promtext.AppendHelp(dst, "python_info", "Python platform information", "gauge")
	var info promtext.LabelSet
	info.Add("implementation", "CPython")
	info.Add("major", py.major)
	info.Add("minor", py.minor)
	info.Add("patchlevel", py.patch)
	info.Add("version", py.major+"."+py.minor+"."+py.patch)
	dst = promtext.AppendSample(dst, "python_info", "", &info, "", 1)

	gen := func(dst []byte, name, help string, v [3]float64) []byte {
		dst = promtext.AppendHelp(dst, name, help, "counter")
		for g := range 3 {
			var ls promtext.LabelSet
			ls.Add("generation", strconv.Itoa(g))
			dst = promtext.AppendSample(dst, name, "", &ls, "", v[g])
		}
		return dst
	}
	m := math.Floor(up / 60)
	dst = gen(dst, "python_gc_objects_collected_total", "Objects collected during gc",
		[3]float64{21843 + math.Floor(up*37), 6512 + math.Floor(up*3), 1024 + 61*m})
	dst = gen(dst, "python_gc_objects_uncollectable_total", "Uncollectable object found during GC", [3]float64{})
	return gen(dst, "python_gc_collections_total", "Number of times this generation was collected",
		[3]float64{1702 + math.Floor(up*4), 154 + math.Floor(up/3), 11 + m})
}

// appendHTTP writes the families of the API server's HTTP instrumentation
// (prometheus-fastapi-instrumentator), which follow vLLM's on a real page.
func (r *renderer) appendHTTP(dst []byte, st *snap.PageState) []byte {
	var completions int64
	for i := range st.Engines {
		for _, n := range st.Engines[i].Success {
			completions += n
		}
	}
	handlers := []struct {
		path, method string
		n            int64
	}{
		{"/v1/completions", "POST", completions},
		{"/v1/chat/completions", "POST", 0},
		{"/metrics", "GET", st.Http.Metrics},
		{"/health", "GET", st.Http.Health},
	}
	if st.Http.WeightInfo > 0 { // the instrumentation creates a handler's child at its first request
		handlers = append(handlers, struct {
			path, method string
			n            int64
		}{"/weight_info", "GET", st.Http.WeightInfo})
	}
	const help = "Total number of requests by method, status and handler."
	for pass, suffix := range []string{"_total", "_created"} {
		dst = promtext.AppendHelp(dst, "http_requests"+suffix, help, []string{"counter", "gauge"}[pass])
		for _, h := range handlers {
			var ls promtext.LabelSet
			ls.Add("handler", h.path)
			ls.Add("method", h.method)
			ls.Add("status", "2xx")
			v := float64(h.n)
			if pass == 1 {
				v = st.CreatedAt
			}
			dst = promtext.AppendSample(dst, "http_requests", suffix, &ls, "", v)
		}
	}
	// The trailing space is in the instrumentator's own HELP text.
	const durHelp = "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. "
	const name = "http_request_duration_highr_seconds"
	var none promtext.LabelSet
	dst = promtext.AppendHelp(dst, name, durHelp, "histogram")
	counts := st.Http.Duration.Counts
	if counts == nil {
		counts = make([]uint64, len(r.httpLes))
	}
	dst = promtext.AppendHistogramChild(dst, name, &none, r.httpLes, counts, st.Http.Duration.Sum)
	dst = promtext.AppendHelp(dst, name+"_created", durHelp, "gauge")
	return promtext.AppendSample(dst, name, "_created", &none, "", st.CreatedAt)
}

// newVLLMPageWriter returns the writer of the pages of cfg's vLLM servers: the layout of its
// release with the families its options add, through the multiprocess collector when the
// servers run several API server processes.
func NewVLLMPageWriter(cfg fleetconfig.Config) snap.PageRenderer {
	v, err := parseVersion(cfg.Version)
	if err != nil {
		v = &v020
	}
	r := newRenderer(v.withShape(cfg).withOptions(cfg), cfg.Model, snap.NewBucketSet(cfg.MaxModelLen), cfg.BlocksPerEngine, cfg.DP)
	if cfg.Multiprocess() {
		return newMultiprocessRenderer(r)
	}
	return r
}
