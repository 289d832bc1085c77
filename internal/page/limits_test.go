package page

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// bigPage is a page of n series of one counter family, each on its own engine when engines is
// set, else all on engine 0 with distinct other labels. Its lines are as long as real vLLM ones.
func bigPage(n int, engines bool) []byte {
	var b bytes.Buffer
	b.WriteString("# TYPE vllm:prompt_tokens counter\n")
	for i := range n {
		if engines {
			fmt.Fprintf(&b, "vllm:prompt_tokens_total{engine=\"%d\",model_name=\"meta-llama/Llama-3.1-70B-Instruct-FP8-dynamic\",pad=\"%s\"} 1.234567e+06\n", i, strings.Repeat("p", 10))
		} else {
			fmt.Fprintf(&b, "vllm:prompt_tokens_total{engine=\"0\",model_name=\"meta-llama/Llama-3.1-70B-Instruct-FP8-dynamic\",shard=\"%d\"} 1.234567e+06\n", i)
		}
	}
	return b.Bytes()
}

// hugePage is bigPage(100000, true), about 12.5 MB, built once.
var hugePage = sync.OnceValue(func() []byte { return bigPage(100000, true) })

func TestParsePageLimits(t *testing.T) {
	byEngine := hugePage()
	if len(byEngine) < 12<<20 {
		t.Fatalf("generated page is %d bytes, want about 12.5 MB", len(byEngine))
	}
	bySeries := bigPage(100000, false)
	fixture := readPage(t, "prometheus-client-render-vllm-0.20.prom")
	tests := []struct {
		name string
		body []byte
		lim  Limits
		want string // error substring, "" for none
	}{
		{"100,000 engines", byEngine, DefaultLimits, `line 66: engine "64" is one more than the limit of 64 workers (engines) per target`},
		{"100,000 series on one engine", bySeries, DefaultLimits, "line 20002: more than the limit of 20000 series (samples of the families vllmstat reads) per target"},
		{"a real page within the defaults", fixture, DefaultLimits, ""},
		{"a real page over a series limit", fixture, Limits{MaxSeries: 10}, "more than the limit of 10 series"},
		{"a real page over a worker limit", fixture, Limits{MaxWorkers: 1}, `engine "1" is one more than the limit of 1 workers`},
		{"no limits", bigPage(20001, false), Limits{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePageLimits(tt.body, tt.lim)
			if tt.want == "" {
				if err != nil || p == nil {
					t.Fatalf("page within limits: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrLimit with %q", err, tt.want)
			}
			if p != nil {
				t.Fatal("a page over its limits was returned")
			}
		})
	}
}

// TestParsePageLimitsStopsEarly checks that a page over its limits costs what the limits allow,
// not what the page holds: refusing 100,000 engines allocates no more than refusing 10,000, and
// less than a tenth of the page's size.
func TestParsePageLimitsStopsEarly(t *testing.T) {
	cost := func(body []byte) (allocs, bytes uint64) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := ParsePageLimits(body, DefaultLimits); !errors.Is(err, ErrLimit) {
			t.Fatalf("page of %d bytes: %v, want ErrLimit", len(body), err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc
	}
	smallA, smallB := cost(bigPage(10000, true))
	hugeA, hugeB := cost(hugePage())
	if hugeA > smallA+smallA/10 || hugeB > smallB+smallB/10 || hugeB > uint64(len(hugePage())/10) {
		t.Fatalf("refusing 100,000 engines: %d allocations, %d bytes; 10,000 engines: %d, %d", hugeA, hugeB, smallA, smallB)
	}
}

// BenchmarkParsePageLimits shows the cost of refusing a 12.5 MB page of 100,000 engines:
// bounded by DefaultLimits (compare B/op and allocs/op with BenchmarkParsePageHuge).
func BenchmarkParsePageLimits(b *testing.B) {
	body := hugePage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePageLimits(body, DefaultLimits); !errors.Is(err, ErrLimit) {
			b.Fatal(err)
		}
	}
}

// BenchmarkParsePageHuge parses the same page without limits.
func BenchmarkParsePageHuge(b *testing.B) {
	body := hugePage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParsePage(body); err != nil {
			b.Fatal(err)
		}
	}
}

// routerPage is a router's page of SGLang servers (names with '_', worker_addr added), each a
// scheduler of DP rank 0 with a copy per TP rank (tps of them) and a tokenizer, and tokenizers
// more servers of a tokenizer alone.
func routerPage(servers, tps, tokenizers int) []byte {
	var b bytes.Buffer
	for i := range servers + tokenizers {
		addr := fmt.Sprintf("http://10.0.%d.%d:30000", i/250, i%250)
		if i < servers {
			for tp := range tps {
				fmt.Fprintf(&b, "sglang_num_running_reqs{dp_rank=\"0\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"%d\",worker_addr=%q} 2\n", tp, addr)
			}
		}
		fmt.Fprintf(&b, "sglang_prompt_tokens_total{model_name=\"m\",worker_addr=%q} 100\n", addr)
	}
	return b.Bytes()
}

// The worker limit counts an SGLang page's workers by server and DP rank: not the copies its
// TP ranks export, nor its tokenizers, which are bounded by the same number on their own. An
// error names the labels that made the workers.
func TestWorkerLimitSGLang(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		servers, tps, tokens int
		want                 string // error substring, "" for none
	}{
		{"64 servers and their tokenizers", 64, 1, 0, ""},
		{"a server of 100 TP ranks", 1, 100, 0, ""},
		{"65 servers", 65, 1, 0, `engine "" with dp_rank="0",worker_addr="http://10.0.0.64:30000" is one more than the limit of 64 workers (engines) per target; its workers are told apart by dp_rank, worker_addr`},
		{"64 servers and 1 tokenizer more", 64, 1, 1, `worker_addr="http://10.0.0.64:30000" is one more than the limit of 64 SGLang tokenizers`},
		{"65 tokenizers", 0, 0, 65, `worker_addr="http://10.0.0.64:30000" is one more than the limit of 64 SGLang tokenizers (workers without ranks) per target; its workers are told apart by worker_addr`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := routerPage(tt.servers, tt.tps, tt.tokens)
			p, err := ParsePageLimits(body, DefaultLimits)
			if tt.want != "" {
				if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want ErrLimit with %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("page within limits: %v", err)
			}
			n := 0
			for _, ep := range p.Engines {
				if ep.Tokenizer() {
					n++
				}
			}
			if n != tt.servers+tt.tokens || len(p.Engines) != 2*tt.servers+tt.tokens {
				t.Errorf("%d workers, %d of them tokenizers; want %d and %d", len(p.Engines), n, 2*tt.servers+tt.tokens, tt.servers+tt.tokens)
			}
		})
	}
}
