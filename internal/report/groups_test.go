package report

import (
	"slices"
	"testing"

	"github.com/vllmstat/vllmstat/internal/vllm"
)

// The new families land in the groups the spec gives them; split keys share a chart per
// family (per value when they have statistics).
func TestGroupsOfOptionalFamilies(t *testing.T) {
	keys := []string{
		"vllm/spec_decode_acceptance_rate",
		"vllm/spec_decode_acceptance_rate_per_pos/0",
		"vllm/spec_decode_acceptance_rate_per_pos/1",
		"vllm/external_prefix_cache_hit_rate",
		"vllm/num_requests_waiting_by_reason/capacity/mean",
		"vllm/num_requests_waiting_by_reason/capacity/p95",
		"vllm/num_requests_waiting_by_reason/deferred/mean",
		"vllm/request_success/stop",
		"vllm/request_success/length",
		"vllm/corrupted_requests",
	}
	charts := map[string][]string{} // group -> chart titles
	members := map[string][]string{}
	var titles []string
	for _, g := range groupKeys(keys) {
		for _, c := range g.Charts {
			charts[g.Name] = append(charts[g.Name], c.ID)
			titles = append(titles, c.Title)
			for _, i := range c.Keys {
				members[c.ID] = append(members[c.ID], keys[i])
			}
		}
	}
	for group, want := range map[string][]string{
		"Speculative decoding": {"spec_decode_acceptance_rate", "spec_decode_acceptance_rate_per_pos"},
		"Prefix cache":         {"external_prefix_cache_hit_rate"},
		"Queue":                {"num_requests_waiting_by_reason/capacity", "num_requests_waiting_by_reason/deferred"},
		"Throughput":           {"request_success"},
		"Other":                {"corrupted_requests"},
	} {
		if !slices.Equal(charts[group], want) {
			t.Errorf("group %s: charts %v, want %v", group, charts[group], want)
		}
	}
	// Titled as the spec titles them, a split label's value after its family's title.
	wantTitles := []string{"External prefix cache hit rate", "Requests waiting by reason: capacity", "Requests waiting by reason: deferred",
		"Requests finished", "Draft acceptance rate", "Acceptance rate by draft position", "Corrupted requests"}
	if !slices.Equal(titles, wantTitles) {
		t.Errorf("titles %q, want %q", titles, wantTitles)
	}
	if got := members["spec_decode_acceptance_rate_per_pos"]; len(got) != 2 {
		t.Errorf("per-position chart holds %v, want both positions", got)
	}
}

// Every family, ratio and rate of the spec is charted under the spec's title with a unit, not
// under its key.
func TestChartTitlesFromSpec(t *testing.T) {
	want := map[string]string{} // chart id -> title
	var keys []string
	add := func(id, title string, ks ...string) {
		want[id] = title
		for _, k := range ks {
			keys = append(keys, "vllm/"+k)
		}
	}
	for _, f := range vllm.Gauges {
		if f.StateOnly || f.Split != "" && !f.Scalars {
			continue // read for the time ledger's states or derived keys alone: no keys
		}
		if f.Split != "" {
			add(f.Name, f.Title, f.Name+"/x")
			continue
		}
		add(f.Name, f.Title, f.Name+"/mean")
	}
	for _, f := range vllm.Counters {
		if f.Split != "" && !f.Total {
			continue // read for derived keys alone
		}
		if f.Split != "" {
			add(f.Name, f.Title, f.Name+"/x")
			continue
		}
		add(f.Name, f.Title, f.Name)
		add(f.Name+" per interval", f.Title+" per interval", f.Name+"/p95")
	}
	for _, f := range vllm.Hists {
		add(f.Name, f.Title, f.Name+"/p50")
	}
	for _, r := range vllm.Ratios {
		add(r.Name, r.Title, r.Name)
	}
	for _, r := range vllm.Rates {
		add(r.Name(), vllm.Counters[r.Of].Title+" per second", r.Name())
	}
	seen := 0
	for _, g := range groupKeys(keys) {
		for _, c := range g.Charts {
			seen++
			if w, ok := want[c.ID]; !ok || c.Title != w || c.Unit == "" || c.Title == c.ID {
				t.Errorf("chart %s: title %q, unit %q; want title %q and a unit", c.ID, c.Title, c.Unit, w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d charts, want %d", seen, len(want))
	}
}

// The workers' asleep fraction is charted beside their idle fraction in the fleet balance,
// not under "Other", and after the ledger's charts when the records have the ledger.
func TestAsleepBesideIdle(t *testing.T) {
	keys := []string{
		"vllm/fleet_busy_s", "vllm/straggler_tail_s",
		"vllm/time/engine_s", "vllm/time/idle_s", "vllm/time/idle_fraction",
		"vllm/worker_asleep_fraction/max", "vllm/worker_asleep_fraction/mean",
		"vllm/worker_idle_fraction/max", "vllm/worker_idle_fraction/mean",
	}
	var got []string
	for _, g := range groupKeys(keys) {
		for _, c := range g.Charts {
			got = append(got, g.Name+": "+c.ID)
		}
	}
	want := []string{
		"Fleet balance: time/<state>_s",
		"Fleet balance: time/<state>_fraction",
		"Fleet balance: straggler_tail_s",
		"Fleet balance: fleet_busy_s",
		"Fleet balance: worker_idle_fraction",
		"Fleet balance: worker_asleep_fraction",
	}
	if !slices.Equal(got, want) {
		t.Errorf("charts %q\nwant %q", got, want)
	}
}
