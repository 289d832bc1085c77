package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var keep = flag.String("keep", "", "also write the test reports to this folder, to look at them")

// pageDataOf extracts the embedded data of a page.
func pageDataOf(t testing.TB, page []byte) *pageData {
	t.Helper()
	s := string(page)
	i := strings.Index(s, `<script type="application/json" id="data">`)
	j := strings.Index(s[i:], "</script>")
	if i < 0 || j < 0 {
		t.Fatal("no data in the page")
	}
	var d pageData
	if err := json.Unmarshal([]byte(s[i+len(`<script type="application/json" id="data">`):i+j]), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestWriteReport(t *testing.T) {
	for _, tt := range []struct {
		name           string
		steps, workers int
		timelines      bool
	}{
		{"8 workers", 12, 8, true},
		{"40 workers", 6, 40, true},
		{"no timelines", 5, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := writeRun(t, dir, tt.steps, tt.workers, 40, tt.timelines)
			var b bytes.Buffer
			if err := Write(&b, dir, Options{Title: "test <run>"}); err != nil {
				t.Fatal(err)
			}
			page := b.Bytes()
			if *keep != "" {
				os.WriteFile(filepath.Join(*keep, strings.ReplaceAll(tt.name, " ", "_")+".html"), page, 0o644)
			}
			for _, bad := range []string{"http://", "https://", "src=", "<link"} {
				if i := bytes.Index(page, []byte(bad)); i >= 0 && !bytes.Contains(page[i-20:i], []byte("target")) && !strings.Contains(string(page[max(i-40, 0):i+40]), "w3.org/2000/svg") {
					t.Errorf("the page refers to something outside it: %q", page[max(i-40, 0):i+40])
				}
			}
			if !bytes.Contains(page, []byte("<title>test &lt;run&gt;</title>")) {
				t.Error("the title is not escaped")
			}
			d := pageDataOf(t, page)
			if len(d.Steps) != tt.steps || len(d.Keys) != len(recs[1].Metrics) {
				t.Errorf("steps %d keys %d", len(d.Steps), len(d.Keys))
			}
			charted := 0
			for _, g := range d.Groups {
				for _, c := range g.Charts {
					charted += len(c.Keys)
				}
			}
			if charted != len(d.Keys) {
				t.Errorf("%d keys in charts, want every one of %d", charted, len(d.Keys))
			}
			if tt.timelines != (len(d.Timelines) == tt.steps) {
				t.Errorf("%d timelines for %d steps", len(d.Timelines), tt.steps)
			}
		})
	}
}

func TestGroups(t *testing.T) {
	keys := []string{"llm/e2e_request_latency_seconds/p50", "llm/generation_tokens", "llm/generation_tokens/max", "llm/generation_tokens/mean", "llm/generation_tokens_per_s", "llm/kv_cache_usage_perc/max",
		"llm/kv_cache_usage_perc/mean", "llm/num_preemptions", "llm/num_requests_waiting/mean", "llm/prefix_cache_hit_rate", "llm/prefix_cache_hit_rate/p95",
		"llm/request_queue_time_seconds/p99", "llm/request_success/stop", "llm/something_new", "llm/time_to_first_token_seconds/p50"}
	var got []string
	for _, g := range groupKeys(keys) {
		for _, c := range g.Charts {
			var ks []string
			for _, k := range c.Keys {
				ks = append(ks, strings.TrimPrefix(keys[k], "llm/"))
			}
			got = append(got, fmt.Sprintf("%s: %s (%s; %s) = %s", g.Name, c.ID, c.Title, c.Unit, strings.Join(ks, ",")))
		}
	}
	// The seed's figures lead their groups, then the spec's order: a rate before its counter,
	// a family's total before its per-interval statistics. Titles and units are the spec's.
	want := []string{
		"Prefix cache: prefix_cache_hit_rate (Prefix cache hit rate; hits / queries (0–1)) = prefix_cache_hit_rate,prefix_cache_hit_rate/p95",
		"Preemptions: num_preemptions (Preemptions; preemptions per step) = num_preemptions",
		"KV cache: kv_cache_usage_perc (KV cache usage; fraction of KV cache in use (0–1)) = kv_cache_usage_perc/max,kv_cache_usage_perc/mean",
		"Queue: num_requests_waiting (Requests waiting; requests) = num_requests_waiting/mean",
		"Queue: request_queue_time_seconds (Queue time; seconds) = request_queue_time_seconds/p99",
		"Throughput: generation_tokens_per_s (Generation tokens per second; tokens per second) = generation_tokens_per_s",
		"Throughput: generation_tokens (Generation tokens; tokens per step) = generation_tokens",
		"Throughput: generation_tokens per interval (Generation tokens per interval; tokens per interval) = generation_tokens/max,generation_tokens/mean",
		"Throughput: request_success (Requests finished; requests per step) = request_success/stop",
		"Latency: time_to_first_token_seconds (Time to first token; seconds) = time_to_first_token_seconds/p50",
		"Latency: e2e_request_latency_seconds (End-to-end request latency; seconds) = e2e_request_latency_seconds/p50",
		"Other: something_new (something_new; ) = something_new",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("groups:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
