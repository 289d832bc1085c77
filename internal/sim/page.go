package sim

import (
	"math"
	"strconv"
	"time"
)

// pageState is what one server's page shows, copied out of the simulation and the HTTP side so
// that rendering needs no lock.
type pageState struct {
	engines []engineStats
	// createdAt is the Unix time the server (re)started: every _created sample and
	// process_start_time_seconds.
	createdAt float64
	// uptime is wall seconds since then; the process and Python families grow with it.
	uptime float64
	http   httpStats
	// restarts counts the server's restarts, which give an SGLang page's processes new pids.
	restarts int
	// epoch is the Unix time of simulated time 0 and speed the simulation's, which date the
	// children that appear while the server runs.
	epoch, speed float64
}

// unixOf is the Unix time of simulated time d.
func (st *pageState) unixOf(d time.Duration) float64 { return st.epoch + d.Seconds()/st.speed }

// httpStats are the counts the API server's HTTP instrumentation keeps, apart from
// /v1/completions, whose count is the engines' finished requests.
type httpStats struct {
	metrics, health int64
	weightInfo      int64 // GET /weight_info, served by a fleet that syncs weights
	duration        dynHistogram
}

// dynHistogram is a histogram with a slice of counts, for the HTTP duration histogram, which
// has more buckets than engine histograms allow.
type dynHistogram struct {
	counts []uint64
	sum    float64
	count  uint64
}

func (h *dynHistogram) observe(bounds []float64, v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(bounds)+1)
	}
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	h.counts[i]++
	h.sum += v
	h.count++
}

func (h *dynHistogram) copyFrom(o *dynHistogram) {
	h.counts = append(h.counts[:0], o.counts...)
	h.sum, h.count = o.sum, o.count
}

// httpDurationBounds are prometheus-fastapi-instrumentator's "highr" buckets: 0.01 to 0.59 in
// steps of 0.01 (computed by multiplication, as Python does, hence 0.35000000000000003), then
// a few coarse ones.
var httpDurationBounds = func() []float64 {
	var b []float64
	step := 0.01
	for i := 1; i < 60; i++ {
		b = append(b, float64(i)*step)
	}
	return append(b, 1, 2, 5, 10, 30, 60)
}()

// pageRenderer writes one server's page.
type pageRenderer interface {
	render(dst []byte, st *pageState) []byte
}

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

func newRenderer(v *version, model string, b *bucketSet, numBlocks, dp int) *renderer {
	r := &renderer{v: v, model: model, numBlocks: strconv.Itoa(numBlocks), les: map[string][]string{},
		httpLes: leStrings(httpDurationBounds), rlLes: leStrings(rlDurationBounds)}
	for _, f := range v.families {
		if f.kind == famHistogram {
			r.les[f.buckets] = leStrings(b.bounds(f.buckets))
		}
	}
	for i := range dp {
		r.engines = append(r.engines, strconv.Itoa(i))
	}
	return r
}

// engineLabels returns the labels every child of engine i carries.
func (r *renderer) engineLabels(i int) labelSet {
	var ls labelSet
	if r.v.engineLabel {
		ls.add("engine", r.engines[i])
	}
	ls.add("model_name", r.model)
	return ls
}

func (r *renderer) render(dst []byte, st *pageState) []byte {
	dst = r.appendProcess(dst, st)
	for i := range r.v.families {
		dst = r.appendFamily(dst, &r.v.families[i], st)
	}
	return r.appendHTTP(dst, st)
}

func (r *renderer) appendFamily(dst []byte, f *family, st *pageState) []byte {
	switch f.kind {
	case famGauge:
		dst = appendHelp(dst, f.name, f.help, "gauge")
		// A gauge with an extra label lists its children value by value, engine by engine.
		for j := range max(len(f.extraValues), 1) {
			for i := range st.engines {
				ls := r.engineLabels(i)
				if f.extraLabel != "" {
					ls.add(f.extraLabel, f.extraValues[j])
				}
				dst = appendSample(dst, f.name, "", &ls, "", f.value(&st.engines[i], j))
			}
		}
	case famCounter:
		dst = appendHelp(dst, f.name+"_total", f.help, "counter")
		dst = r.counterChildren(dst, f, st, "_total", false)
		dst = appendHelp(dst, f.name+"_created", f.help, "gauge")
		dst = r.counterChildren(dst, f, st, "_created", true)
	case famHistogram:
		dst = appendHelp(dst, f.name, f.help, "histogram")
		les := r.les[f.buckets]
		for i := range st.engines {
			ls := r.engineLabels(i)
			h := f.hist(&st.engines[i])
			dst = appendHistogramChild(dst, f.name, &ls, les, h.counts[:len(les)], h.sum)
		}
		dst = appendHelp(dst, f.name+"_created", f.help, "gauge")
		for i := range st.engines {
			ls := r.engineLabels(i)
			dst = appendSample(dst, f.name, "_created", &ls, "", st.createdAt)
		}
	case famCustom:
		dst = f.write(r, dst, f, st)
	case famInfo:
		dst = appendHelp(dst, f.name, f.help, "gauge")
		for i := range st.engines {
			var ls labelSet
			ls.add("block_size", strconv.Itoa(BlockSize))
			ls.add("cache_dtype", "auto")
			ls.add("enable_prefix_caching", "True")
			ls.add("engine", r.engines[i])
			ls.add("gpu_memory_utilization", "0.9")
			ls.add("num_gpu_blocks", r.numBlocks)
			dst = appendSample(dst, f.name, "", &ls, "", 1)
		}
	}
	return dst
}

func (r *renderer) counterChildren(dst []byte, f *family, st *pageState, suffix string, created bool) []byte {
	n := max(len(f.extraValues), 1)
	for i := range st.engines {
		for j := range n {
			ls := r.engineLabels(i)
			if f.extraLabel != "" {
				ls.add(f.extraLabel, f.extraValues[j])
			}
			v := st.createdAt
			if !created {
				v = f.value(&st.engines[i], j)
			}
			dst = appendSample(dst, f.name, suffix, &ls, "", v)
		}
	}
	return dst
}

// appendProcess writes the process and Python families prometheus_client's default collectors
// add to every page, with values that grow with uptime the way an API server's would.
func (r *renderer) appendProcess(dst []byte, st *pageState) []byte {
	var none labelSet
	up := st.uptime
	page := 4096.0
	dst = appendHelp(dst, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge")
	dst = appendSample(dst, "process_virtual_memory_bytes", "", &none, "", 15302094848+page*math.Floor(math.Min(up, 3600)*3))
	dst = appendHelp(dst, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge")
	dst = appendSample(dst, "process_resident_memory_bytes", "", &none, "", 1153433600+page*math.Floor(math.Min(up, 3600)*11))
	dst = appendHelp(dst, "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge")
	dst = appendSample(dst, "process_start_time_seconds", "", &none, "", math.Round(st.createdAt*100)/100)
	// prometheus_client adds user and system time, each in clock ticks divided by 100.
	utime, stime := math.Floor(up*100*0.31)+412, math.Floor(up*100*0.04)+96
	dst = appendHelp(dst, "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter")
	dst = appendSample(dst, "process_cpu_seconds_total", "", &none, "", utime/100+stime/100)
	dst = appendHelp(dst, "process_open_fds", "Number of open file descriptors.", "gauge")
	dst = appendSample(dst, "process_open_fds", "", &none, "", float64(58+4*len(st.engines)))
	dst = appendHelp(dst, "process_max_fds", "Maximum number of open file descriptors.", "gauge")
	dst = appendSample(dst, "process_max_fds", "", &none, "", 1048576)

	py := r.v.python
	dst = appendHelp(dst, "python_info", "Python platform information", "gauge")
	var info labelSet
	info.add("implementation", "CPython")
	info.add("major", py.major)
	info.add("minor", py.minor)
	info.add("patchlevel", py.patch)
	info.add("version", py.major+"."+py.minor+"."+py.patch)
	dst = appendSample(dst, "python_info", "", &info, "", 1)

	gen := func(dst []byte, name, help string, v [3]float64) []byte {
		dst = appendHelp(dst, name, help, "counter")
		for g := range 3 {
			var ls labelSet
			ls.add("generation", strconv.Itoa(g))
			dst = appendSample(dst, name, "", &ls, "", v[g])
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
func (r *renderer) appendHTTP(dst []byte, st *pageState) []byte {
	var completions int64
	for i := range st.engines {
		for _, n := range st.engines[i].success {
			completions += n
		}
	}
	handlers := []struct {
		path, method string
		n            int64
	}{
		{"/v1/completions", "POST", completions},
		{"/v1/chat/completions", "POST", 0},
		{"/metrics", "GET", st.http.metrics},
		{"/health", "GET", st.http.health},
	}
	if st.http.weightInfo > 0 { // the instrumentation creates a handler's child at its first request
		handlers = append(handlers, struct {
			path, method string
			n            int64
		}{"/weight_info", "GET", st.http.weightInfo})
	}
	const help = "Total number of requests by method, status and handler."
	for pass, suffix := range []string{"_total", "_created"} {
		dst = appendHelp(dst, "http_requests"+suffix, help, []string{"counter", "gauge"}[pass])
		for _, h := range handlers {
			var ls labelSet
			ls.add("handler", h.path)
			ls.add("method", h.method)
			ls.add("status", "2xx")
			v := float64(h.n)
			if pass == 1 {
				v = st.createdAt
			}
			dst = appendSample(dst, "http_requests", suffix, &ls, "", v)
		}
	}
	// The trailing space is in the instrumentator's own HELP text.
	const durHelp = "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. "
	const name = "http_request_duration_highr_seconds"
	var none labelSet
	dst = appendHelp(dst, name, durHelp, "histogram")
	counts := st.http.duration.counts
	if counts == nil {
		counts = make([]uint64, len(r.httpLes))
	}
	dst = appendHistogramChild(dst, name, &none, r.httpLes, counts, st.http.duration.sum)
	dst = appendHelp(dst, name+"_created", durHelp, "gauge")
	return appendSample(dst, name, "_created", &none, "", st.createdAt)
}

// newVLLMPageWriter returns the writer of the pages of cfg's vLLM servers: the layout of its
// release with the families its options add, through the multiprocess collector when the
// servers run several API server processes.
func newVLLMPageWriter(cfg Config) pageRenderer {
	v, err := parseVersion(cfg.Version)
	if err != nil {
		v = &v020
	}
	r := newRenderer(v.withShape(cfg).withOptions(cfg), cfg.Model, newBucketSet(cfg.MaxModelLen), cfg.BlocksPerEngine, cfg.DP)
	if cfg.multiprocess() {
		return newMultiprocessRenderer(r)
	}
	return r
}
