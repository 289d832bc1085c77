package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRunNeverShowsCredentials runs "vllmstat run" against a server that wants basic auth, with
// the credentials in the target's URL and an API token: the scrapes authenticate, and neither
// the user name nor the password appears on stderr, in steps.jsonl, in the recording or in
// anything the API serves, which needs the token.
func TestRunNeverShowsCredentials(t *testing.T) {
	const user, pw, token = "usr-x7", "pw-x7", "tok-api"
	a := newFakeServer(t, "prometheus-client-render-vllm-0.20.prom", 5)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pw {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		a.serve(w, r)
	}))
	defer srv.Close()
	clean := srv.URL + "/metrics"
	withInfo := strings.Replace(clean, "http://", "http://"+user+":"+pw+"@", 1)

	t.Setenv("VLLMSTAT_API_TOKEN", token)
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl.gz")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", withInfo, "--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "200ms",
			"--listen", "127.0.0.1:0", "--out", dir, "--record", rec, "--per-worker"}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	get := func(path, authz string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Wait for a closed step with the target's increases: the scrapes authenticated.
	if !testkit.Poll(10*time.Second, func() bool {
		_, body := get("/metrics", "Bearer "+token)
		return strings.Contains(body, `vllmstat_target_up{target="`+clean+`"} 1`) && strings.Contains(body, "vllmstat_step_worker_vllm_generation_tokens{")
	}) {
		_, body := get("/metrics", "Bearer "+token)
		t.Fatalf("no authenticated scrape in a closed step\n%s\n%s", stderr.String(), body)
	}
	served := ""
	for _, p := range []string{"/metrics", "/v1/live", "/v1/targets", "/v1/steps", "/"} {
		if code, _ := get(p, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d, want 401", p, code)
		}
		code, body := get(p, "bearer "+token)
		if code != 200 {
			t.Errorf("%s with the token: %d", p, code)
		}
		served += body
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	steps, raw := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	if len(steps) == 0 || len(steps[0].PerWorker) == 0 || steps[0].PerWorker[0].Target != clean {
		t.Fatalf("steps %+v, want per-worker records of %s", steps, clean)
	}
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	recorded, _ := io.ReadAll(gz)
	if !bytes.Contains(recorded, []byte(`"target":"`+clean+`"`)) {
		t.Fatalf("the recording does not name the target by its clean URL")
	}
	for name, text := range map[string]string{"stderr": stderr.String(), "steps.jsonl": string(raw), "recording": string(recorded), "the API": served} {
		for _, s := range []string{user, pw} {
			if strings.Contains(text, s) {
				t.Errorf("%s shows %q", name, s)
			}
		}
	}
}
