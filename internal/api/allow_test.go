package api

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestAPITargetsRefused: whoever may call the API could make vllmstat fetch a cloud metadata
// service (and show what it answered in its errors) or itself. Targets at link-local and
// metadata addresses, the metadata service's name, this machine's unspecified address and the
// API's own address are refused through PUT and POST, naming the rule, unless allow_targets
// lists the address; a configured target listed again is not refused, and DELETE never is.
func TestAPITargetsRefused(t *testing.T) {
	policy := TargetPolicy{
		API:        netip.MustParseAddrPort("127.0.0.1:9400"),
		Configured: []string{"http://169.254.7.7:8000/metrics"},
	}
	refused := []struct{ url, rule string }{
		{"http://169.254.169.254/latest/meta-data/", `targets[1]: "http://169.254.169.254/latest/meta-data/": 169.254.169.254 is a link-local address, where cloud metadata services answer; a target added through the API may not be there unless allow_targets lists the address`},
		{"http://169.254.0.1:8000/metrics", "169.254.0.1 is a link-local address"},
		{"http://[::ffff:169.254.169.254]/metrics", "169.254.169.254 is a link-local address"},
		{"http://[fe80::1]:8000/metrics", "fe80::1 is a link-local address"},
		{"http://[fe80::1%25eth0]:8000/metrics", "fe80::1 is a link-local address"},
		{"http://[febf::1]/metrics", "febf::1 is a link-local address"},
		{"http://[fd00:ec2::254]/metrics", "fd00:ec2::254 is a cloud metadata service's address"},
		{"http://100.100.100.200/metrics", "100.100.100.200 is a cloud metadata service's address"},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal is a cloud metadata service's name"},
		{"http://METADATA.google.internal.:80/metrics", "metadata.google.internal is a cloud metadata service's name"},
		{"http://0.0.0.0:8000/metrics", "0.0.0.0 is the unspecified address"},
		{"http://[::]:8000/metrics", ":: is the unspecified address"},
		{"http://127.0.0.1:9400/metrics", "vllmstat's own API"},
		{"http://127.0.0.2:9400/v1/live", "vllmstat's own API"},
		{"http://localhost:9400/metrics", "vllmstat's own API"},
		{"http://[::1]:9400/metrics", "vllmstat's own API"},
		{"http://0xa9fea9fe/metrics", "reads as an IPv4 address"},
		{"http://2852039166/metrics", "reads as an IPv4 address"},
		{"http://0251.0376.0251.0376/metrics", "reads as an IPv4 address"},
		{"http://169.254.43518/metrics", "reads as an IPv4 address"},
	}
	allowed := []string{
		"http://127.0.0.1:8000/metrics", // an engine beside vllmstat
		"http://localhost:8001/metrics",
		"https://127.0.0.1/metrics",    // port 443, not the API's
		"http://10.0.0.7:9400/metrics", // another node's port 9400
		"http://[fd00:ec2::253]:8000/metrics",
		"http://100.100.100.201:8000/metrics",
		"http://169.254.7.7:8000/metrics", // a configured target
		"http://metadata.example.com/metrics",
		"http://gpu-1.example.com:8000/metrics",
		"http://1.example:8000/metrics",
	}
	for _, method := range []string{"PUT", "POST"} {
		fc := &fakeCollector{}
		h := New(Options{Collector: fc, Targets: policy})
		for _, tt := range refused {
			code, out := do(t, h, method, "/v1/targets", `{"targets": ["http://10.0.0.1:8000/metrics", "`+tt.url+`"]}`, "")
			msg, _ := out["error"].(string)
			if code != http.StatusBadRequest || !strings.Contains(msg, "targets[1]: ") || !strings.Contains(msg, tt.rule) {
				t.Errorf("%s %s: %d %q, want 400 with %q", method, tt.url, code, msg, tt.rule)
			}
		}
		if len(fc.targets) != 0 {
			t.Fatalf("%s: refused calls changed the targets: %v", method, fc.targets)
		}
		for _, u := range allowed {
			if code, out := do(t, h, method, "/v1/targets", `{"targets": ["`+u+`"]}`, ""); code != http.StatusOK {
				t.Errorf("%s %s: %d %v, want 200", method, u, code, out)
			}
		}
	}

	// allow_targets lets addresses through, and only those.
	policy.Allow = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fd00:ec2::254/128"), netip.MustParsePrefix("127.0.0.1/32")}
	h := New(Options{Collector: &fakeCollector{}, Targets: policy})
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.0.1]/metrics", "http://[fd00:ec2::254]/metrics", "http://127.0.0.1:9400/metrics"} {
		if code, out := do(t, h, "PUT", "/v1/targets", `{"targets": ["`+u+`"]}`, ""); code != http.StatusOK {
			t.Errorf("allowed %s: %d %v, want 200", u, code, out)
		}
	}
	for _, u := range []string{"http://[fe80::1]/metrics", "http://100.100.100.200/metrics", "http://metadata.google.internal/", "http://localhost:9400/metrics"} {
		if code, _ := do(t, h, "PUT", "/v1/targets", `{"targets": ["`+u+`"]}`, ""); code != http.StatusBadRequest {
			t.Errorf("%s, which allow_targets does not list: %d, want 400", u, code)
		}
	}

	// Removing is never refused: a target that is not there is ignored.
	if code, out := do(t, h, "DELETE", "/v1/targets", `{"targets": ["http://[fe80::1]/metrics"]}`, ""); code != http.StatusOK {
		t.Errorf("DELETE of a refused address: %d %v", code, out)
	}
}
