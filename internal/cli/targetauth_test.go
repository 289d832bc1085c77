package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// authServer serves a page on one loopback address and records the Authorization header of
// every request it gets ("" for none).
type authServer struct {
	url string
	mu  sync.Mutex
	got []string
}

// serveAuth starts an authServer on ip (any address of 127/8 is loopback on Linux); it skips the
// test where ip cannot be bound.
func serveAuth(t *testing.T, ip string) *authServer {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	s := &authServer{url: "http://" + l.Addr().String() + "/metrics"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Header.Get("Authorization"))
		s.mu.Unlock()
		fmt.Fprintln(w, `vllm:generation_tokens_total{engine="0",model_name="m"} 1`)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// hostPort is the server's host:port, as a file_sd file lists it.
func (s *authServer) hostPort() string {
	return strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/metrics")
}

// requests is how many requests the server has had.
func (s *authServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// since returns the Authorization headers of the requests from the n-th on.
func (s *authServer) since(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got[min(n, len(s.got)):]...)
}

// authRun is a "vllmstat run" with a config file, an API on loopback and step_every 0.
type authRun struct {
	t      *testing.T
	base   string
	token  string // the API's token, "" for none
	stderr *syncbuf.Buffer
}

func startAuthRun(t *testing.T, config, apiToken string) *authRun {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "vllmstat.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VLLMSTAT_API_TOKEN", apiToken)
	ctx, cancel := context.WithCancel(context.Background())
	r := &authRun{t: t, token: apiToken, stderr: &syncbuf.Buffer{}}
	done := make(chan int, 1)
	go func() {
		done <- runWith(ctx, "run", []string{"--config", path, "--interval", "0.05", "--scrape-timeout", "5s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--out", filepath.Join(dir, "out")}, &bytes.Buffer{}, r.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("run exited %d\n%s", code, r.stderr.String())
		}
	})
	r.base = apiURL(t, r.stderr)
	return r
}

// targets sends {"targets": urls} with method (POST or PUT), with the API's token if it has one.
func (r *authRun) targets(method string, urls ...string) {
	r.t.Helper()
	body := `{"targets": ["` + strings.Join(urls, `", "`) + `"]}`
	if len(urls) == 0 {
		body = `{"targets": []}`
	}
	req, err := http.NewRequest(method, r.base+"/v1/targets", strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("%s /v1/targets: %d %s", method, resp.StatusCode, b)
	}
}

// check waits until s has had three requests from the from-th on and checks that each carried
// want (a header value, "" for none).
func (r *authRun) check(name string, s *authServer, from int, want string) {
	r.t.Helper()
	if !testkit.Poll(20*time.Second, func() bool { return s.requests() >= from+3 }) {
		r.t.Fatalf("%s: %d requests, want %d\n%s", name, s.requests(), from+3, r.stderr.String())
	}
	for i, got := range s.since(from) {
		if got != want {
			r.t.Errorf("%s: request %d had Authorization %q, want %q", name, from+i, got, want)
			return
		}
	}
}

// TestAPITargetsAndTopLevelCredentials runs "vllmstat run" with top-level credentials and targets
// from the config file, from file_sd and from the API, each a loopback server that records the
// Authorization header it gets. The config's and file_sd's targets always get the credentials;
// a target added through the API gets them when the API has a token and no hosts are listed, or
// when its host is in the credentials' hosts; otherwise none, whoever may call the API.
func TestAPITargetsAndTopLevelCredentials(t *testing.T) {
	const secret = "fleet-tok-x7"
	bearer := "Bearer " + secret
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("scraper:"+secret))
	for _, tt := range []struct {
		name     string
		creds    string // the top-level credentials mapping; SECRET is the secret's file
		apiToken string
		want     string            // what the config's and file_sd's targets get
		api      map[string]string // an API target's address -> what it gets
	}{
		{name: "no token, no hosts", creds: "authorization: {credentials_file: SECRET}", want: bearer,
			api: map[string]string{"127.0.0.1": "", "127.0.0.2": ""}},
		{name: "api token", creds: "authorization: {credentials_file: SECRET}", apiToken: "api-tok", want: bearer,
			api: map[string]string{"127.0.0.1": bearer, "127.0.0.3": bearer}},
		{name: "hosts", creds: "authorization: {credentials_file: SECRET, hosts: [127.0.0.2, 127.0.4.0/24]}", want: bearer,
			api: map[string]string{"127.0.0.2": bearer, "127.0.4.9": bearer, "127.0.0.3": "", "127.0.0.1": ""}},
		{name: "hosts and api token", creds: "authorization: {credentials_file: SECRET, hosts: [127.0.0.2]}", apiToken: "api-tok", want: bearer,
			api: map[string]string{"127.0.0.2": bearer, "127.0.0.3": ""}},
		{name: "basic_auth and hosts", creds: "basic_auth: {username: scraper, password_file: SECRET, hosts: [127.0.0.2]}", want: basic,
			api: map[string]string{"127.0.0.2": basic, "127.0.0.3": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			secretFile := filepath.Join(dir, "secret")
			if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			fromConfig, fromFile := serveAuth(t, "127.0.0.1"), serveAuth(t, "127.0.0.1")
			sd := filepath.Join(dir, "sd.json")
			writeAtomic(t, sd, fmt.Sprintf(`[{"targets": [%q]}]`, fromFile.hostPort()))
			config := fmt.Sprintf("targets: [%q]\nfile_sd: [%q]\nrefresh_interval: 100ms\n%s\n",
				fromConfig.url, sd, strings.ReplaceAll(tt.creds, "SECRET", strconv.Quote(secretFile)))
			r := startAuthRun(t, config, tt.apiToken)
			r.check("config target", fromConfig, 0, tt.want)
			r.check("file_sd target", fromFile, 0, tt.want)

			var urls []string
			servers := map[string]*authServer{}
			for ip := range tt.api {
				s := serveAuth(t, ip)
				servers[ip] = s
				urls = append(urls, s.url)
			}
			r.targets("POST", urls...)
			for ip, want := range tt.api {
				r.check("API target on "+ip, servers[ip], 0, want)
			}

			// PUT replaces the static targets: the config's target listed again keeps its
			// credentials, also once it was removed in between; the API's keep their rule.
			n := fromConfig.requests()
			r.targets("PUT", append([]string{fromConfig.url}, urls...)...)
			r.check("config target listed again", fromConfig, n, tt.want)
			r.targets("PUT")
			r.targets("PUT", append([]string{fromConfig.url}, urls...)...)
			n = fromConfig.requests()
			r.check("config target removed and listed again", fromConfig, n, tt.want)
			for ip, want := range tt.api {
				s := servers[ip]
				r.check("API target on "+ip+" listed again", s, s.requests(), want)
			}
			r.check("file_sd target", fromFile, fromFile.requests(), tt.want)
			withheld := 0
			for _, want := range tt.api {
				if want == "" {
					withheld = 1 // said once, however many
				}
			}
			if n := strings.Count(r.stderr.String(), "scraped without the top-level credentials"); n != withheld {
				t.Errorf("the log says %d times that an API target goes without the credentials, want %d\n%s", n, withheld, r.stderr.String())
			}
			if strings.Contains(r.stderr.String(), secret) {
				t.Errorf("the log shows the secret:\n%s", r.stderr.String())
			}
		})
	}
}
