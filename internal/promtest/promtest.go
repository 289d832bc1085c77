// Package promtest starts real Prometheus and VictoriaMetrics servers on loopback ports for
// tests, and reads back what they store. Only tests use it. The servers are Debian's packages
// (prometheus, victoria-metrics); where one is missing, Require skips the test loudly, or fails
// it when the environment variable CI is "true", so that CI never passes without them.
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrMissing is the error of a server whose binary is not installed.
var ErrMissing = errors.New("binary not installed")

// Require stops t when err (from starting a server) is not nil: a missing binary skips the test
// with a loud message, except in CI (CI=true), where it fails like every other error.
func Require(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrMissing) {
		if os.Getenv("CI") != "true" {
			t.Skipf("SKIPPED, NOT TESTED: %v (apt-get install -y prometheus victoria-metrics; CI fails here)", err)
		}
		t.Fatalf("%v: CI must install Debian's prometheus and victoria-metrics packages", err)
	}
	t.Fatal(err)
}

// Binary returns the path of the first of names found in PATH.
func Binary(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", strings.Join(names, " or "), ErrMissing)
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Server is a running server process with a temporary data directory.
type Server struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:40123.
	URL  string
	name string
	dir  string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
	once sync.Once
}

// start runs bin with args (built from the port and data directory) and waits until ready
// answers 200.
func start(name, bin string, args func(port int, dir string) []string, ready string) (*Server, error) {
	dir, err := os.MkdirTemp("", "vllmstat-"+name+"-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 3 { // the free port may be taken before the server binds it
		port, err := FreePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), name: name, dir: dir, out: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
		s.cmd = exec.Command(bin, args(port, dir)...)
		s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		go func() { s.cmd.Wait(); close(s.done) }()
		if last = s.waitReady(ready, 30*time.Second); last == nil {
			return s, nil
		}
		s.stop()
	}
	os.RemoveAll(dir)
	return nil, last
}

func (s *Server) waitReady(path string, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it was ready: %s", s.name, s.out)
		default:
		}
		resp, err := http.Get(s.URL + path)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s: %s", s.name, d, s.out)
}

func (s *Server) stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// Close stops the server and removes its data.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		s.stop()
		os.RemoveAll(s.dir)
	})
}

// Output returns the end of the server's log.
func (s *Server) Output() string { return s.out.String() }

// Job is a scrape job of the Prometheus configuration.
type Job struct {
	Name     string
	Targets  []string // host:port
	Path     string   // default /metrics
	Interval time.Duration
}

// Prometheus is a running Prometheus with the remote-write receiver on and an out-of-order
// window of an hour, so that tests may push samples from the recent past.
type Prometheus struct {
	*Server
	config string
	mu     sync.Mutex
}

// StartPrometheus starts Prometheus with the given scrape jobs.
func StartPrometheus(jobs ...Job) (*Prometheus, error) {
	bin, err := Binary("prometheus")
	if err != nil {
		return nil, err
	}
	p := &Prometheus{}
	cfgDir, err := os.MkdirTemp("", "vllmstat-prometheus-config-")
	if err != nil {
		return nil, err
	}
	p.config = filepath.Join(cfgDir, "prometheus.yml")
	if err := p.writeConfig(jobs); err != nil {
		return nil, err
	}
	p.Server, err = start("prometheus", bin, func(port int, dir string) []string {
		return []string{
			"--config.file=" + p.config,
			"--storage.tsdb.path=" + dir,
			fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
			"--web.enable-remote-write-receiver",
			"--web.enable-lifecycle",
			"--log.level=warn",
		}
	}, "/-/ready")
	if err != nil {
		os.RemoveAll(cfgDir)
		return nil, err
	}
	return p, nil
}

// Close stops Prometheus and removes its data and configuration.
func (p *Prometheus) Close() {
	if p == nil {
		return
	}
	p.Server.Close()
	os.RemoveAll(filepath.Dir(p.config))
}

func (p *Prometheus) writeConfig(jobs []Job) error {
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1m\n")
	b.WriteString("storage:\n  tsdb:\n    out_of_order_time_window: 1h\n")
	b.WriteString("scrape_configs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&b, "  - job_name: %q\n", j.Name)
		if j.Interval > 0 {
			fmt.Fprintf(&b, "    scrape_interval: %s\n    scrape_timeout: %s\n", j.Interval, j.Interval)
		}
		if j.Path != "" {
			fmt.Fprintf(&b, "    metrics_path: %q\n", j.Path)
		}
		b.WriteString("    static_configs:\n      - targets:\n")
		for _, t := range j.Targets {
			fmt.Fprintf(&b, "          - %q\n", t)
		}
	}
	return os.WriteFile(p.config, []byte(b.String()), 0o644)
}

// SetJobs replaces the scrape jobs and reloads the configuration.
func (p *Prometheus) SetJobs(jobs ...Job) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writeConfig(jobs); err != nil {
		return err
	}
	resp, err := http.Post(p.URL+"/-/reload", "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("reload prometheus: %s: %s", resp.Status, b)
	}
	return nil
}

// RemoteWriteURL is where Prometheus receives remote write.
func (p *Prometheus) RemoteWriteURL() string { return p.URL + "/api/v1/write" }

// StartVictoriaMetrics starts single-node VictoriaMetrics with no query latency offset and no
// result cache, so that what was written can be read back at once (after Flush).
func StartVictoriaMetrics() (*Server, error) {
	bin, err := Binary("victoria-metrics", "victoriametrics", "victoria-metrics-prod")
	if err != nil {
		return nil, err
	}
	return start("victoria-metrics", bin, func(port int, dir string) []string {
		return []string{
			"-storageDataPath=" + dir,
			fmt.Sprintf("-httpListenAddr=127.0.0.1:%d", port),
			"-search.latencyOffset=0s",
			"-search.disableCache",
			"-retentionPeriod=1y",
			"-loggerLevel=WARN",
		}
	}, "/health")
}

// Flush makes what VictoriaMetrics received searchable.
func Flush(ctx context.Context, s *Server) error {
	_, err := get(ctx, s.URL+"/internal/force_flush")
	return err
}

// Sample is one stored sample, its time in Unix milliseconds.
type Sample struct {
	T int64
	V float64
}

// Series is one stored series.
type Series struct {
	Metric  map[string]string
	Samples []Sample
}

// Query runs an instant query at t; a range-vector query returns the raw samples.
func Query(ctx context.Context, s *Server, q string, t time.Time) ([]Series, error) {
	v := url.Values{"query": {q}, "time": {formatTime(t)}}
	return queryAPI(ctx, s.URL+"/api/v1/query?"+v.Encode())
}

// QueryRange runs a range query.
func QueryRange(ctx context.Context, s *Server, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	v := url.Values{"query": {q}, "start": {formatTime(start)}, "end": {formatTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	return queryAPI(ctx, s.URL+"/api/v1/query_range?"+v.Encode())
}

// Export returns VictoriaMetrics' raw samples of the series that match, between start and end.
func Export(ctx context.Context, s *Server, match string, start, end time.Time) ([]Series, error) {
	v := url.Values{"match[]": {match}, "start": {formatTime(start)}, "end": {formatTime(end)}}
	b, err := get(ctx, s.URL+"/api/v1/export?"+v.Encode())
	if err != nil {
		return nil, err
	}
	var out []Series
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for dec.More() {
		var line struct {
			Metric     map[string]string `json:"metric"`
			Values     []json.Number     `json:"values"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := dec.Decode(&line); err != nil {
			return nil, fmt.Errorf("decode export: %w", err)
		}
		if len(line.Values) != len(line.Timestamps) {
			return nil, fmt.Errorf("export: %d values for %d timestamps", len(line.Values), len(line.Timestamps))
		}
		sr := Series{Metric: line.Metric}
		for i, n := range line.Values {
			f, err := strconv.ParseFloat(n.String(), 64)
			if err != nil {
				return nil, fmt.Errorf("export value %q: %w", n, err)
			}
			sr.Samples = append(sr.Samples, Sample{T: line.Timestamps[i], V: f})
		}
		out = append(out, sr)
	}
	return out, nil
}

func queryAPI(ctx context.Context, u string) ([]Series, error) {
	b, err := get(ctx, u)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string   `json:"metric"`
				Value  []json.RawMessage   `json:"value"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("decode query answer: %w: %.200s", err, b)
	}
	if resp.Status != "success" {
		return nil, fmt.Errorf("query: %s", resp.Error)
	}
	var out []Series
	for _, r := range resp.Data.Result {
		sr := Series{Metric: r.Metric}
		points := r.Values
		if r.Value != nil {
			points = [][]json.RawMessage{r.Value}
		}
		for _, p := range points {
			s, err := parsePoint(p)
			if err != nil {
				return nil, err
			}
			sr.Samples = append(sr.Samples, s)
		}
		out = append(out, sr)
	}
	return out, nil
}

// parsePoint reads [seconds, "value"] from their JSON text, so that the milliseconds are exact.
func parsePoint(p []json.RawMessage) (Sample, error) {
	if len(p) != 2 {
		return Sample{}, fmt.Errorf("point %s: want [time, value]", p)
	}
	t, err := parseMillis(string(p[0]))
	if err != nil {
		return Sample{}, err
	}
	v, err := strconv.ParseFloat(strings.Trim(string(p[1]), `"`), 64)
	if err != nil {
		return Sample{}, fmt.Errorf("point value %s: %w", p[1], err)
	}
	return Sample{T: t, V: v}, nil
}

// parseMillis reads decimal Unix seconds such as "1700000000.123" as milliseconds.
func parseMillis(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || len(frac) > 3 {
		return 0, fmt.Errorf("timestamp %q: not whole milliseconds", s)
	}
	ms := int64(0)
	if frac != "" {
		ms, err = strconv.ParseInt((frac + "00")[:3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("timestamp %q: %w", s, err)
		}
	}
	return sec*1000 + ms, nil
}

func formatTime(t time.Time) string {
	ms := t.UnixMilli()
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}

func get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %q: %s: %.300s", u, resp.Status, b)
	}
	return b, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
