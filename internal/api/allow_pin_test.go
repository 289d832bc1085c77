package api

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestOwnAPIOnNetworkAddress: an API listening on a network address is at that address too,
// not only on loopback: a target there with the API's port is refused through PUT and POST, as
// loopback ones are, over IPv4 and IPv6; the address with another port, and another address
// with the API's port, are not.
func TestOwnAPIOnNetworkAddress(t *testing.T) {
	for _, tt := range []struct {
		api              string
		refused, allowed []string
	}{
		{"192.0.2.10:9400",
			[]string{"http://192.0.2.10:9400/metrics", "http://[::ffff:192.0.2.10]:9400/metrics", "http://127.0.0.1:9400/metrics"},
			[]string{"http://192.0.2.10:8000/metrics", "http://192.0.2.11:9400/metrics", "https://192.0.2.10/metrics"}},
		{"[2001:db8::10]:9400",
			[]string{"http://[2001:db8::10]:9400/v1/live", "http://[::1]:9400/metrics"},
			[]string{"http://[2001:db8::10]:8000/metrics", "http://[2001:db8::11]:9400/metrics"}},
	} {
		policy := TargetPolicy{API: netip.MustParseAddrPort(tt.api)}
		for _, method := range []string{"PUT", "POST"} {
			fc := &fakeCollector{}
			h := New(Options{Collector: fc, Targets: policy})
			for _, u := range tt.refused {
				code, out := do(t, h, method, "/v1/targets", `{"targets": ["`+u+`"]}`, "")
				if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "vllmstat's own API") {
					t.Errorf("API on %s, %s %s: %d %q, want 400 naming the own API", tt.api, method, u, code, msg)
				}
			}
			if len(fc.targets) != 0 {
				t.Fatalf("API on %s, %s: refused calls changed the targets: %v", tt.api, method, fc.targets)
			}
			for _, u := range tt.allowed {
				if code, out := do(t, h, method, "/v1/targets", `{"targets": ["`+u+`"]}`, ""); code != http.StatusOK {
					t.Errorf("API on %s, %s %s: %d %v, want 200", tt.api, method, u, code, out)
				}
			}
		}
	}
}

// TestOwnAPIOnUnspecifiedAddress: an API listening on 0.0.0.0 or :: answers on every address of
// the machine, so each of them with the API's port is its own, as Local gives them (asked when
// the targets change: a test's addresses here); another machine's address is not.
func TestOwnAPIOnUnspecifiedAddress(t *testing.T) {
	local := func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("2001:db8::10")}
	}
	for _, api := range []string{"0.0.0.0:9400", "[::]:9400"} {
		h := New(Options{Collector: &fakeCollector{}, Targets: TargetPolicy{API: netip.MustParseAddrPort(api), Local: local}})
		for _, u := range []string{"http://192.0.2.10:9400/metrics", "http://[2001:db8::10]:9400/metrics", "http://[::ffff:192.0.2.10]:9400/metrics"} {
			code, out := do(t, h, "PUT", "/v1/targets", `{"targets": ["`+u+`"]}`, "")
			if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "vllmstat's own API") {
				t.Errorf("API on %s, PUT %s: %d %q, want 400 naming the own API", api, u, code, msg)
			}
		}
		for _, u := range []string{"http://192.0.2.11:9400/metrics", "http://192.0.2.10:8000/metrics"} {
			if code, out := do(t, h, "PUT", "/v1/targets", `{"targets": ["`+u+`"]}`, ""); code != http.StatusOK {
				t.Errorf("API on %s, PUT %s: %d %v, want 200", api, u, code, out)
			}
		}
	}
}
