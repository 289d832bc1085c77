package api

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

// TestAPITargetsRefusedOtherSpellings: the API's own address with its port written with leading
// zeros (the dialer reads 09400 as 9400), and the short names under which GCE's and EC2's
// metadata services also answer, are refused as their usual spellings are.
func TestAPITargetsRefusedOtherSpellings(t *testing.T) {
	policy := TargetPolicy{API: netip.MustParseAddrPort("127.0.0.1:9400")}
	h := New(Options{Collector: &fakeCollector{}, Targets: policy})
	for _, tt := range []struct{ url, rule string }{
		{"http://127.0.0.1:09400/metrics", "127.0.0.1:9400 is vllmstat's own API"},
		{"http://127.0.0.1:0009400/metrics", "127.0.0.1:9400 is vllmstat's own API"},
		{"http://[::1]:09400/metrics", "[::1]:9400 is vllmstat's own API"},
		{"http://localhost:09400/metrics", "localhost:9400 is vllmstat's own API"},
		{"http://metadata/computeMetadata/v1/", "metadata is a cloud metadata service's name"},
		{"http://Metadata.:80/computeMetadata/v1/", "metadata is a cloud metadata service's name"},
		{"http://metadata.google.internal./computeMetadata/v1/", "metadata.google.internal is a cloud metadata service's name"},
		{"http://instance-data/latest/meta-data/", "instance-data is a cloud metadata service's name"},
		{"http://INSTANCE-DATA.:80/latest/meta-data/", "instance-data is a cloud metadata service's name"},
		{"http://instance-data.ec2.internal/latest/meta-data/", "instance-data.ec2.internal is a cloud metadata service's name"},
		{"http://instance-data.us-west-2.compute.internal/latest/meta-data/", "instance-data.us-west-2.compute.internal is a cloud metadata service's name"},
	} {
		code, out := do(t, h, "PUT", "/v1/targets", `{"targets": ["`+tt.url+`"]}`, "")
		msg, _ := out["error"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, tt.rule) {
			t.Errorf("%s: %d %q, want 400 with %q", tt.url, code, msg, tt.rule)
		}
	}
	for _, u := range []string{
		"http://127.0.0.1:09401/metrics", // another port
		"http://127.0.0.1:08000/metrics",
		"http://metadata.example.com/metrics",
		"http://instance-data.example.com/metrics",
		"http://my-metadata:8000/metrics",
	} {
		if code, out := do(t, h, "PUT", "/v1/targets", `{"targets": ["`+u+`"]}`, ""); code != http.StatusOK {
			t.Errorf("%s: %d %v, want 200", u, code, out)
		}
	}
}

// TestAPIStepNumbersAreDecimal: a step number in a path or a query is decimal digits, leading
// zeros decimal; a 0x, 0b or 0o prefix is refused naming the parameter, never read in another
// base. JSON bodies have no leading zeros, and a step given as a string is refused.
func TestAPIStepNumbersAreDecimal(t *testing.T) {
	fc := &fakeCollector{steps: []step.Record{{Step: 8}, {Step: 10}, {Step: 11}}}
	h := New(Options{Collector: fc})
	code, out := do(t, h, "GET", "/v1/steps/010", "", "")
	if code != http.StatusOK || out["step"] != float64(10) {
		t.Errorf("GET /v1/steps/010: %d %v, want step 10", code, out)
	}
	code, out = do(t, h, "GET", "/v1/steps?since=010", "", "")
	if steps, _ := out["steps"].([]any); code != http.StatusOK || len(steps) != 2 {
		t.Errorf("GET /v1/steps?since=010: %d %v, want steps 10 and 11", code, out)
	}
	for _, tt := range []struct{ path, want string }{
		{"/v1/steps/0x8", `step "0x8" is not allowed: must be a whole number in decimal digits: 0x, 0b and 0o prefixes are not read`},
		{"/v1/steps/0o10", `step "0o10" is not allowed: must be a whole number in decimal digits`},
		{"/v1/steps?since=0b1000", `since="0b1000" is not allowed: must be a whole number in decimal digits`},
		{"/v1/steps?since=1e1", `since="1e1" is not allowed: must be a whole number in decimal digits`},
	} {
		code, out := do(t, h, "GET", tt.path, "", "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, tt.want) {
			t.Errorf("GET %s: %d %q, want 400 with %q", tt.path, code, msg, tt.want)
		}
	}
	for _, tt := range []struct{ path, body, want string }{
		{"/v1/steps/end", `{"step": "0x8"}`, `"step" must be a whole number`},
		{"/v1/steps/end", `{"step": 010}`, "malformed JSON body"},
		{"/v1/policy", `{"version": "0o10"}`, `"version" must be a whole number`},
		{"/v1/policy", `{"version": 0x8}`, "malformed JSON body"},
	} {
		code, out := do(t, h, "POST", tt.path, tt.body, "")
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, tt.want) {
			t.Errorf("POST %s %s: %d %q, want 400 with %q", tt.path, tt.body, code, msg, tt.want)
		}
	}
	if fc.ended || fc.published {
		t.Errorf("a refused call ended a step (%v) or published a version (%v)", fc.ended, fc.published)
	}
}
