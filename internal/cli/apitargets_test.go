package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
)

// TestRunRefusesMetadataTargets runs "vllmstat run" whose config lists a target at a link-local
// address and allows one metadata address, and adds targets through its API: cloud metadata
// services (by address and by name), the unspecified address and the API itself are 400, naming
// the rule, and are not scraped; the configured link-local target and the allowed address are
// taken.
func TestRunRefusesMetadataTargets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 1\n")
	}))
	defer srv.Close()
	page := srv.URL + "/metrics"
	const linkLocal, allowed = "http://169.254.0.9:1/metrics", "http://[fd00:ec2::254]:1/metrics"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "vllmstat.yaml")
	if err := os.WriteFile(cfg, []byte("targets: ["+page+", "+linkLocal+"]\nallow_targets: [fd00:ec2::254]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--config", cfg, "--interval", "0.05", "--scrape-timeout", "1s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--out", filepath.Join(dir, "out")}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	u, _ := url.Parse(base)
	send := func(method string, urls ...string) (int, string) {
		t.Helper()
		b, _ := json.Marshal(map[string][]string{"targets": urls})
		return apiCall(t, method, base+"/v1/targets", string(b), map[string]string{"Content-Type": "application/json"})
	}
	for _, tt := range []struct{ url, rule string }{
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address, where cloud metadata services answer; a target added through the API may not be there unless allow_targets lists the address"},
		{"http://[fe80::1]:8000/metrics", "fe80::1 is a link-local address"},
		{"http://100.100.100.200/latest/meta-data/", "100.100.100.200 is a cloud metadata service's address"},
		{"http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal is a cloud metadata service's name"},
		{"http://0.0.0.0:" + u.Port() + "/metrics", "0.0.0.0 is the unspecified address"},
		{"http://[::]:8000/metrics", ":: is the unspecified address"},
		{"http://127.0.0.1:" + u.Port() + "/metrics", "127.0.0.1:" + u.Port() + " is vllmstat's own API"},
		{"http://localhost:" + u.Port() + "/v1/live", "localhost:" + u.Port() + " is vllmstat's own API"},
	} {
		for _, method := range []string{"POST", "PUT"} {
			if code, body := send(method, page, tt.url); code != http.StatusBadRequest || !strings.Contains(body, tt.rule) {
				t.Errorf("%s %s: %d %s, want 400 with %q", method, tt.url, code, body, tt.rule)
			}
		}
	}
	targets := func() []string {
		code, body := send("GET")
		var l struct{ Targets []string }
		if err := json.Unmarshal([]byte(body), &l); err != nil || code != 200 {
			t.Fatalf("GET /v1/targets: %d %s", code, body)
		}
		slices.Sort(l.Targets)
		return l.Targets
	}
	if got, want := targets(), sorted(linkLocal, page); !slices.Equal(got, want) {
		t.Errorf("targets after the refused calls: %v, want the configured ones %v", got, want)
	}
	// The configured target listed again, and an address allow_targets lists.
	if code, body := send("PUT", page, linkLocal, allowed); code != http.StatusOK {
		t.Errorf("PUT of the configured targets and an allowed address: %d %s", code, body)
	}
	if got, want := targets(), sorted(allowed, linkLocal, page); !slices.Equal(got, want) {
		t.Errorf("targets after PUT: %v, want %v", got, want)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}
