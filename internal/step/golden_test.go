package step

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// The golden records pin every byte a tracker gives for random fleets: the JSON lines, and
// every timeline point and activity figure with all its bits. They were written by a tracker
// that kept every sample with its timestamp, so a tracker that keeps less must still give the
// same bytes. Regenerate (only when the output is meant to change) with
// `go test ./internal/step -run TestGoldenRecords -update`.

// goldenSeeds are the fleets of the golden file; `-golden-seeds=N` hashes N more fleets, to
// compare two versions of the tracker by hand (`go test -run TestGoldenHash -v -args
// -golden-seeds=2000` on each, then compare the printed hashes).
var goldenSeeds = flag.Int("golden-seeds", 0, "random fleets to hash in TestGoldenHash")

// goldenOptions are the tracker settings each fleet runs under.
var goldenOptions = []Options{
	{PerWorker: true, Scalars: true},
	{Scalars: true},
	{PerWorker: true},
}

// goldenEngine is one engine's cumulative counters and current gauges.
type goldenEngine struct {
	e       eng
	reasons map[string]float64 // num_requests_waiting_by_reason by reason, nil: not on the page
}

// goldenRun feeds a random fleet to a tracker with opt and writes every record it gives, from
// EndStep and from Peek, to out.
func goldenRun(seed uint64, opt Options, out *bytes.Buffer) {
	rng := rand.New(rand.NewPCG(seed, 0x90d))
	tr := NewTracker(opt)
	nTargets := 1 + rng.IntN(4)
	type tgt struct {
		url     string
		engines []*goldenEngine
		gone    bool
	}
	var ts []*tgt
	for i := range nTargets {
		t := &tgt{url: fmt.Sprintf("http://h%d:8000/metrics", i)}
		n := 1 + rng.IntN(2)
		for j := range n {
			label := strconv.Itoa(j)
			if n == 1 && rng.IntN(2) == 0 {
				label = "-"
			}
			ge := &goldenEngine{e: eng{engine: label, success: map[string]float64{}}}
			if rng.IntN(2) == 0 {
				ge.e.ttft = make([]float64, len(ttftBounds))
			}
			if rng.IntN(2) == 0 {
				ge.reasons = map[string]float64{}
			}
			t.engines = append(t.engines, ge)
		}
		ts = append(ts, t)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	step := int64(0)
	ticks := 20 + rng.IntN(40)
	nextEnd := 5 + rng.IntN(30)
	for tick := range ticks {
		for _, t := range ts {
			now = now.Add(time.Duration(1+rng.IntN(int(50*time.Millisecond))) + 10*time.Millisecond)
			if t.gone {
				if rng.IntN(20) == 0 {
					t.gone = false
				}
				continue
			}
			if rng.IntN(60) == 0 {
				tr.Forget(t.url)
				t.gone = true
				continue
			}
			if rng.IntN(15) == 0 {
				tr.Observe(now, t.url, nil, testErr{})
				continue
			}
			var es []eng
			var extra strings.Builder
			for _, ge := range t.engines {
				advance(rng, ge)
				if rng.IntN(25) == 0 {
					continue // the engine is missing from this page
				}
				e := ge.e
				switch rng.IntN(40) { // a counter's NaN: its increase waits for its next value
				case 0:
					e.hits = math.NaN()
				case 1:
					e.queries = math.NaN()
				}
				es = append(es, e)
				for _, r := range slices.Sorted(mapsKeys(ge.reasons)) {
					lbl := `model_name="m",reason="` + r + `"`
					if ge.e.engine != "-" {
						lbl = `engine="` + ge.e.engine + `",` + lbl
					}
					fmt.Fprintf(&extra, "vllm:num_requests_waiting_by_reason{%s} %v\n", lbl, ge.reasons[r])
				}
			}
			if len(es) == 0 {
				es = append(es, eng{engine: "-"}) // a page with no vLLM engine but this empty one
			}
			tr.Observe(now, t.url, mustPageText(renderPage(es...)+extra.String()), nil)
		}
		if rng.IntN(10) == 0 {
			writeGolden(out, "peek", tr.Peek(now))
		}
		if tick == nextEnd || tick == ticks-1 {
			step++
			now = now.Add(time.Millisecond)
			writeGolden(out, "step", tr.EndStep(step, now))
			nextEnd = tick + 1 + rng.IntN(30)
		}
	}
}

// advance moves an engine's counters and gauges on by a random interval's worth.
func advance(rng *rand.Rand, ge *goldenEngine) {
	e := &ge.e
	q := float64(rng.IntN(400))
	e.queries += q
	e.hits += math.Floor(q * rng.Float64())
	if rng.IntN(8) == 0 {
		e.preempt++
	}
	e.prompt += float64(rng.IntN(3000))
	e.gen += float64(rng.IntN(900))
	for _, r := range []string{"stop", "length", "abort"} {
		if rng.IntN(3) == 0 {
			e.success[r]++
		}
	}
	e.running = float64(rng.IntN(6))
	e.waiting = float64(max(0, rng.IntN(8)-5))
	e.kv = rng.Float64()
	switch rng.IntN(40) {
	case 0:
		e.kv = math.NaN()
	case 1:
		e.running = math.NaN()
	}
	if e.ttft != nil {
		for i := range e.ttft {
			e.ttft[i] += float64(rng.IntN(3))
			if i > 0 {
				e.ttft[i] = max(e.ttft[i], e.ttft[i-1])
			}
		}
		e.ttftSum += rng.Float64()
	}
	if ge.reasons != nil {
		ge.reasons["capacity"] = float64(rng.IntN(4))
		if rng.IntN(3) == 0 {
			ge.reasons["deferred"] = float64(rng.IntN(3))
		}
	}
	if rng.IntN(200) == 0 { // a restart: every counter starts again
		*e = eng{engine: e.engine, success: map[string]float64{}, ttft: clearTTFT(e.ttft)}
	}
}

func clearTTFT(b []float64) []float64 {
	if b == nil {
		return nil
	}
	return make([]float64, len(b))
}

func mapsKeys(m map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func mustPageText(s string) *page.Page {
	p, err := page.ParsePage([]byte(s))
	if err != nil {
		panic(fmt.Sprintf("parse generated page: %v\n%s", err, s))
	}
	return p
}

// writeGolden writes r's JSON line, then its timeline with every float's bits.
func writeGolden(out *bytes.Buffer, kind string, r Record) {
	line, err := MarshalLine(&r)
	if err != nil {
		panic(err)
	}
	out.WriteString(kind + " ")
	out.Write(line)
	if r.Timeline == nil {
		out.WriteString("timeline nil\n")
		return
	}
	fmt.Fprintf(out, "timeline %s\n", r.Timeline.Start.Format(time.RFC3339Nano))
	f := func(x float64) string { return strconv.FormatUint(math.Float64bits(x), 16) }
	for _, w := range r.Timeline.Workers {
		fmt.Fprintf(out, " worker %q %q %q", w.Target, w.Engine, w.Labels)
		if a := w.Activity; a != nil {
			fmt.Fprintf(out, " busy=%s idle=%s last=%s", f(a.BusyS), f(a.IdleS), f(a.LastBusyS))
		}
		out.WriteByte('\n')
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range w.Series {
				if !yield(k) {
					return
				}
			}
		}) {
			fmt.Fprintf(out, "  %s", name)
			for _, p := range w.Series[name] {
				fmt.Fprintf(out, " %s:%s", f(p.OffsetS), f(p.Value))
			}
			out.WriteByte('\n')
		}
	}
}

func goldenAll(seeds []uint64) []byte {
	var out bytes.Buffer
	for _, seed := range seeds {
		for i, opt := range goldenOptions {
			fmt.Fprintf(&out, "# seed %d options %d\n", seed, i)
			goldenRun(seed, opt, &out)
		}
	}
	return out.Bytes()
}

// TestGoldenRecords compares the records of random fleets with the golden file: those of one
// fleet in full, so that a difference shows where it is, and a hash of those of each of many more.
func TestGoldenRecords(t *testing.T) {
	var got bytes.Buffer
	got.Write(goldenAll([]uint64{2}))
	for seed := range uint64(goldenHashed) {
		fmt.Fprintf(&got, "seed %d sha256 %x\n", 100+seed, sha256.Sum256(goldenAll([]uint64{100 + seed})))
	}
	testkit.Golden(t, "golden_records.txt", got.Bytes())
}

// goldenHashed is how many fleets the golden file holds a hash of.
const goldenHashed = 60

// TestGoldenHash prints a hash of the records of -golden-seeds random fleets, for comparing two
// versions of the tracker on many more fleets than the golden file holds.
func TestGoldenHash(t *testing.T) {
	if *goldenSeeds <= 0 {
		t.Skip("no -golden-seeds given")
	}
	h := sha256.New()
	for s := range *goldenSeeds {
		h.Write(goldenAll([]uint64{uint64(1000 + s)}))
	}
	t.Logf("sha256 of %d fleets: %x", *goldenSeeds, h.Sum(nil))
}

// TestNoTimelineSameRecords checks that a tracker keeping no timelines gives the same JSON lines
// as one that keeps them, and no timelines.
func TestNoTimelineSameRecords(t *testing.T) {
	lines := func(b *bytes.Buffer) (recs []string, timelines int) {
		for l := range strings.Lines(b.String()) {
			switch {
			case strings.HasPrefix(l, "peek "), strings.HasPrefix(l, "step "):
				recs = append(recs, l)
			case strings.HasPrefix(l, "timeline ") && l != "timeline nil\n":
				timelines++
			}
		}
		return recs, timelines
	}
	for seed := range uint64(30) {
		for i, opt := range goldenOptions {
			var with, without bytes.Buffer
			goldenRun(seed, opt, &with)
			opt.NoTimeline = true
			goldenRun(seed, opt, &without)
			want, _ := lines(&with)
			got, n := lines(&without)
			if n > 0 {
				t.Fatalf("seed %d options %d: %d records have a timeline", seed, i, n)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d options %d: records differ without timelines:\ngot  %q\nwant %q", seed, i, got, want)
			}
		}
	}
}
