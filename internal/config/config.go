// Package config reads vllmstat's YAML configuration. It accepts the four keys of the NeMo-RL
// vLLM metrics logger where NeMo-RL keeps them (vllm_cfg: at the top, or policy.generation.vllm_cfg),
// so an existing NeMo-RL file works as is, plus vllmstat's own keys: at the top level of a
// vllmstat file, or under vllmstat: in a file that holds other things.
package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the whole configuration of a run.
type Config struct {
	// Enabled is enable_vllm_metrics_logger: false scrapes nothing and writes nothing.
	Enabled bool
	// Interval is vllm_metrics_logger_interval: seconds between scrapes of each target.
	Interval float64
	// LogScalars is vllm_metrics_log_scalars: add mean/max/p95 of the per-interval samples.
	LogScalars bool
	// TimelinePlots is vllm_metrics_log_timeline_plots: draw per-step timeline plots.
	TimelinePlots bool

	// Targets are the /metrics URLs; "host:port" means http://host:port/metrics.
	Targets []string
	// StepEvery closes a step this often; 0 closes steps only on request (and at exit).
	StepEvery time.Duration
	// ScrapeTimeout bounds one scrape; default 80% of the interval, at most 10s.
	ScrapeTimeout time.Duration
	// OutDir receives steps.jsonl and whatever else a run writes.
	OutDir string
	// MetricPrefix replaces the leading "vllm" of every metric key.
	MetricPrefix string
	// PerWorker adds per-worker records to every step.
	PerWorker bool
	// Record, when set, is the path of a recording of every scrape (.gz compresses it).
	Record string
	// MaxBodyBytes bounds a page; a larger one is a failed scrape.
	MaxBodyBytes int64

	// Sinks are the destinations of closed steps besides steps.jsonl, in order.
	Sinks []SinkSpec
	// RecordTimelines writes OUT_DIR/timelines/step_NNNNNN.json even without plots.
	RecordTimelines bool
	// TerminalTimelines prints per-worker block-character timelines at each step close.
	TerminalTimelines bool
	// Listen is the address of the HTTP API ("" = no API).
	Listen string
	// APIToken, when set, is required as a bearer token on every /v1/ call.
	APIToken string
	// AllowInsecureListen permits a non-loopback Listen without an APIToken.
	AllowInsecureListen bool

	// paths records where each setting came from, for error messages.
	paths map[string]string
}

// SinkSpec is one entry of sinks: a type ("jsonl", "tensorboard", "wandb", "remote_write", ...)
// and its own settings, which the sink package decodes and checks.
type SinkSpec struct {
	Type     string
	Path     string     // key path of the entry, for error messages
	Settings *yaml.Node // the entry's mapping (nil for a bare name)
}

// Keys of the NeMo-RL vLLM metrics logger.
const (
	KeyEnable    = "enable_vllm_metrics_logger"
	KeyInterval  = "vllm_metrics_logger_interval"
	KeyScalars   = "vllm_metrics_log_scalars"
	KeyTimelines = "vllm_metrics_log_timeline_plots"
)

// Default returns the configuration used for everything a file and the flags leave unset.
func Default() Config {
	return Config{
		Enabled:      true,
		Interval:     1.0,
		LogScalars:   true,
		StepEvery:    30 * time.Second,
		OutDir:       "vllmstat-out",
		MetricPrefix: "vllm",
		MaxBodyBytes: 16 << 20,
		Listen:       "127.0.0.1:9400",
		paths:        map[string]string{},
	}
}

// Path returns where setting key (the name of a YAML key) was given: a key path in the file, a
// flag, or the key itself for a default.
func (c *Config) Path(key string) string {
	if p, ok := c.paths[key]; ok {
		return p
	}
	return key
}

// SetPath records that key was given at path (a flag name, for instance).
func (c *Config) SetPath(key, path string) {
	if c.paths == nil {
		c.paths = map[string]string{}
	}
	c.paths[key] = path
}

// Timeout returns the effective scrape timeout.
func (c *Config) Timeout() time.Duration {
	if c.ScrapeTimeout > 0 {
		return c.ScrapeTimeout
	}
	d := time.Duration(0.8 * c.Interval * float64(time.Second))
	if d > 10*time.Second {
		d = 10 * time.Second
	}
	return d
}

// IntervalDuration returns the scrape interval.
func (c *Config) IntervalDuration() time.Duration {
	return time.Duration(c.Interval * float64(time.Second))
}

// Problems is every problem of a configuration, reported at once.
type Problems []string

func (p Problems) Error() string {
	if len(p) == 1 {
		return "invalid configuration: " + p[0]
	}
	return "invalid configuration:\n  " + strings.Join(p, "\n  ")
}

// Validate checks every setting and normalises the targets. It returns Problems.
func (c *Config) Validate() error {
	var ps Problems
	bad := func(key string, v any, allowed string) {
		ps = append(ps, fmt.Sprintf("%s: %v is not allowed: %s", c.Path(key), v, allowed))
	}
	if !(c.Interval > 0) || c.Interval > 3600 {
		bad(KeyInterval, c.Interval, "must be a number of seconds > 0 (at most 3600)")
	}
	if c.StepEvery < 0 {
		bad("step_every", c.StepEvery, "must be a duration >= 0 such as 30s (0: steps end only on request)")
	} else if c.StepEvery > 0 && c.Interval > 0 && c.StepEvery < c.IntervalDuration() {
		bad("step_every", c.StepEvery, fmt.Sprintf("must be at least the scrape interval (%gs)", c.Interval))
	}
	if c.ScrapeTimeout < 0 {
		bad("scrape_timeout", c.ScrapeTimeout, "must be a duration > 0 such as 800ms")
	}
	if c.MaxBodyBytes <= 0 {
		bad("max_body_bytes", c.MaxBodyBytes, "must be a number of bytes > 0")
	}
	if c.OutDir == "" {
		bad("out_dir", `""`, "must be a directory path")
	}
	if c.MetricPrefix == "" || strings.ContainsAny(c.MetricPrefix, " \t\n") {
		bad("metric_prefix", strconv.Quote(c.MetricPrefix), "must be a non-empty name without spaces")
	}
	if c.Enabled && len(c.Targets) == 0 {
		ps = append(ps, fmt.Sprintf("%s: no targets: give at least one /metrics URL (or host:port)", c.Path("targets")))
	}
	if c.Listen != "" {
		host, port, err := net.SplitHostPort(c.Listen)
		switch {
		case err != nil || port == "":
			bad("listen", strconv.Quote(c.Listen), "must be host:port such as 127.0.0.1:9400 (empty: no API)")
		case c.APIToken == "" && !c.AllowInsecureListen && !isLoopback(host):
			bad("listen", strconv.Quote(c.Listen), "without api_token (or VLLMSTAT_API_TOKEN) the API listens only on a loopback address; set a token, or allow_insecure_listen: true")
		}
	}
	seen := map[string]bool{}
	for i, t := range c.Targets {
		u, err := NormalizeTarget(t)
		if err != nil {
			ps = append(ps, fmt.Sprintf("%s[%d]: %q is not allowed: %v", c.Path("targets"), i, t, err))
			continue
		}
		if seen[u] {
			ps = append(ps, fmt.Sprintf("%s[%d]: %q is listed twice", c.Path("targets"), i, t))
		}
		seen[u] = true
		c.Targets[i] = u
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

// NormalizeTarget turns "host:port" into "http://host:port/metrics" and checks that a URL is
// http or https with a host.
func NormalizeTarget(t string) (string, error) {
	t = strings.TrimSpace(t)
	if !strings.Contains(t, "://") {
		if _, _, err := net.SplitHostPort(t); err != nil {
			return "", fmt.Errorf("want a URL such as http://host:8000/metrics or host:port")
		}
		t = "http://" + t + "/metrics"
	}
	u, err := url.Parse(t)
	if err != nil {
		return "", fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("scheme %q: only http and https", u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("no host")
	}
	if u.Path == "" {
		u.Path = "/metrics"
	}
	return u.String(), nil
}

// Load reads the file at path over the defaults.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return Parse(b)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
