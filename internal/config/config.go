// Package config reads vllmstat's YAML configuration. It accepts the four keys of the NeMo-RL
// vLLM metrics logger where NeMo-RL keeps them (vllm_cfg: at the top, or policy.generation.vllm_cfg),
// so an existing NeMo-RL file works as is, plus vllmstat's own keys: at the top level of a
// vllmstat file, or under vllmstat: in a file that holds other things.
package config

import (
	"errors"
	"github.com/vllmstat/vllmstat/internal/target"
	"github.com/vllmstat/vllmstat/internal/vllm"

	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vllmstat/vllmstat/internal/discovery"
	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/scrape"
)

// Config is the whole configuration of a run. Its yaml tags are the keys of vllmstat's own
// section (the top level of a vllmstat file, or vllmstat: in a file that holds other things);
// the four logger keys are also read from vllm_cfg: where NeMo-RL keeps them. Fields without a
// tag are derived by Validate or set by the program.
type Config struct {
	// Enabled is enable_vllm_metrics_logger: false scrapes nothing and writes nothing.
	Enabled bool `yaml:"enable_vllm_metrics_logger"`
	// Interval is vllm_metrics_logger_interval: seconds between scrapes of each target.
	Interval float64 `yaml:"vllm_metrics_logger_interval"`
	// LogScalars is vllm_metrics_log_scalars: add mean/max/p95 of the per-interval samples.
	LogScalars bool `yaml:"vllm_metrics_log_scalars"`
	// TimelinePlots is vllm_metrics_log_timeline_plots: draw per-step timeline plots.
	TimelinePlots bool `yaml:"vllm_metrics_log_timeline_plots"`

	// Targets are the /metrics pages to scrape: URLs or host:port strings, or {url: ...,
	// basic_auth: ...} mappings. Before Validate a target's URL is as written (maybe with user
	// info); Validate normalises it, moves user info to the target's credentials, and gives Auth
	// to targets without credentials of their own.
	Targets []target.Target `yaml:"targets" want:"a list of URLs such as http://host:8000/metrics or host:port, or of {url: ..., basic_auth: ...} mappings"`
	// topCredentials are the top-level basic_auth and authorization keys as written; parse
	// turns them into Auth and AuthHosts.
	topCredentials `yaml:",inline"`
	// Auth are the credentials of targets that have none of their own (top-level basic_auth or
	// authorization): those of the config and those discovery finds. A target added through the
	// API gets them only as APIAuth says.
	Auth target.Auth
	// AuthHosts are where Auth may be sent for a target added through the API (their hosts key).
	AuthHosts Hosts
	// StepEvery closes a step this often; 0 closes steps only on request (and at exit).
	StepEvery time.Duration `yaml:"step_every"`
	// ScrapeTimeout bounds one scrape; default 80% of the interval, at most 10s.
	ScrapeTimeout time.Duration `yaml:"scrape_timeout"`
	// OutDir receives steps.jsonl and whatever else a run writes.
	OutDir string `yaml:"out_dir"`
	// ResumeFrom, when set, cuts the out_dir's steps back to this step before the run continues
	// them, for a trainer resumed from its checkpoint of step N: the records of the steps after
	// N in steps.jsonl and the sinks' files go into files beside them (steps.jsonl.cut-<n>, ...),
	// and the run's next step is N+1. nil: the run continues after the out_dir's last step.
	ResumeFrom *int64 `yaml:"resume_from"`
	// MetricPrefix replaces the leading "vllm" of every metric key.
	MetricPrefix string `yaml:"metric_prefix"`
	// PerWorker adds per-worker records to every step.
	PerWorker bool `yaml:"per_worker"`
	// Record, when set, is the path of a recording of every scrape (.gz compresses it).
	Record string `yaml:"record"`
	// MaxBodyBytes bounds a page; a larger one is a failed scrape.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxSeriesPerTarget bounds the series of one target's page (see page.Limits); a page
	// over it is a failed scrape.
	MaxSeriesPerTarget int `yaml:"max_series_per_target"`
	// MaxWorkersPerTarget bounds the workers of one target's page, likewise.
	MaxWorkersPerTarget int `yaml:"max_workers_per_target"`
	// Compression is what pages are asked to be compressed with: gzip or none.
	Compression scrape.Compression `yaml:"compression"`
	// RequestNames asks targets for the samples vllmstat reads only, by name (see
	// scrape.Options.RequestNames).
	RequestNames bool `yaml:"request_names"`
	// WorkerLabels are the labels that, with the target and engine, tell workers apart (Ray's
	// ReplicaId and WorkerId by default; see page.Options). Empty: target and engine alone.
	WorkerLabels []string `yaml:"worker_labels" want:"a list of label names, e.g. [ReplicaId, WorkerId] ([] for none)" item:"a label name"`

	// Sinks are the destinations of closed steps besides steps.jsonl, in order.
	Sinks []SinkSpec `yaml:"sinks" want:"a list of sinks, e.g. [jsonl, tensorboard, wandb]"`
	// RecordTimelines writes OUT_DIR/timelines/step_NNNNNN.json even without plots.
	RecordTimelines bool `yaml:"record_timelines"`
	// TerminalTimelines prints per-worker block-character timelines at each step close.
	TerminalTimelines bool `yaml:"terminal_timelines"`
	// Listen is the address of the HTTP API ("" = no API).
	Listen string `yaml:"listen"`
	// APIToken, when set, is required as a bearer token on every endpoint that serves run data:
	// /v1/, the report at / and /metrics (unless MetricsPublic).
	APIToken target.Secret `yaml:"api_token"`
	// MetricsPublic serves /metrics without the token.
	MetricsPublic bool `yaml:"metrics_public"`
	// AllowInsecureListen permits a non-loopback Listen without an APIToken.
	AllowInsecureListen bool `yaml:"allow_insecure_listen"`
	// AllowTargets are the IP addresses and CIDRs, as written, where a target added through the
	// API may be although the API refuses such an address (link-local, a metadata service's,
	// its own; see api.TargetPolicy). AllowedTargets reads them.
	// GPU names the engines' GPU (gpu: H100; see vllm.GPUNames), whose peak the compute keys'
	// MFU and MBU are shares of. PeakTFLOPS and PeakGBps give a peak, or override the GPU's.
	GPU        string  `yaml:"gpu"`
	PeakTFLOPS float64 `yaml:"peak_tflops_per_gpu"`
	PeakGBps   float64 `yaml:"peak_gbps_per_gpu"`

	AllowTargets []string `yaml:"allow_targets" want:"a list of IP addresses or CIDRs, e.g. [169.254.0.0/16]" item:"an IP address or a CIDR such as 169.254.0.0/16"`

	// DNS are the targets given as dns+ or dnssrv+ URLs, resolved again every RefreshInterval;
	// Validate moves them here from Targets.
	DNS []discovery.DNSName
	// FileSD are the paths or globs of file_sd files (Prometheus' format), re-read every
	// RefreshInterval or 5 s, whichever is shorter. Relative ones are relative to the config
	// file's directory.
	FileSD []string `yaml:"file_sd" want:"a list of file paths or globs, e.g. [targets/*.json]" item:"a file path or glob"`
	// RefreshInterval is how often DNS names are resolved again (refresh_interval).
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// DNSServer, when set, is the DNS server (IP:port) asked instead of the system's.
	DNSServer string `yaml:"dns_server"`

	// paths records where each setting came from, for error messages; lines the line of the
	// settings a file gave, and targetLines the line of each target a file listed.
	paths       map[string]string
	lines       map[string]int
	targetLines []int
}

// UnknownKey words the problem of a key that is not vllmstat's.
func (Config) UnknownKey() string { return "unknown key; vllmstat's keys are" }

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
		MetricPrefix: vllm.Prefix,
		MaxBodyBytes: 16 << 20,
		Listen:       "127.0.0.1:9400",
		paths:        map[string]string{},
		lines:        map[string]int{},

		RefreshInterval: discovery.DefaultRefresh,

		MaxSeriesPerTarget:  page.DefaultLimits.MaxSeries,
		MaxWorkersPerTarget: page.DefaultLimits.MaxWorkers,
		Compression:         scrape.DefaultCompression,
		RequestNames:        true,
		WorkerLabels:        page.DefaultWorkerLabels(),
	}
}

// MinInterval is the shortest scrape interval: below it a scrape loop would mostly measure
// itself.
const MinInterval = 0.01

// intervalRule says what an interval may be; validInterval checks it. A file's interval is
// checked as the file is read, to report it with the file's other problems; Validate checks
// the interval again, wherever it came from (a flag).
var intervalRule = fmt.Sprintf("must be a number of seconds > 0, at least %g (10 ms) and at most 3600, e.g. 0.5", MinInterval)

func validInterval(s float64) bool { return s >= MinInterval && s <= 3600 } // false for NaN

// validPeak reports whether p can be a peak setting: finite and >= 0 (0 is unset).
func validPeak(p float64) bool { return p >= 0 && !math.IsInf(p, 0) } // false for NaN

// TargetsOf returns targets as written (URLs or host:port, maybe with user info), for Validate
// to normalise.
func TargetsOf(raw []string) []target.Target {
	ts := make([]target.Target, len(raw))
	for i, r := range raw {
		ts[i] = target.Target{URL: r}
	}
	return ts
}

// Limits returns the per-target page limits.
func (c *Config) Limits() page.Limits {
	return page.Limits{MaxSeries: c.MaxSeriesPerTarget, MaxWorkers: c.MaxWorkersPerTarget}
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
	delete(c.lines, key)
}

// at returns where key was given and, for a file's key, " (line N)" to end a problem with.
func (c *Config) at(key string) (path, line string) {
	if l := c.lines[key]; l > 0 {
		return c.Path(key), fmt.Sprintf(" (line %d)", l)
	}
	return c.Path(key), ""
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

// Check is a check of settings whose rules another package keeps: the sink types' settings,
// which the registry of sink types (package run) checks. It returns Problems.
type Check func(Config) error

// Validate checks every setting and normalises the targets, then runs checks, and returns
// every problem of them all as Problems: one with a typo in its sinks' settings and one at the
// top of the file are told together.
func (c *Config) Validate(checks ...Check) error {
	var ps Problems
	bad := func(key string, v any, allowed string) {
		path, line := c.at(key)
		ps = append(ps, fmt.Sprintf("%s: %v is not allowed: %s%s", path, v, allowed, line))
	}
	if !validInterval(c.Interval) {
		bad(KeyInterval, c.Interval, intervalRule)
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
	if c.MaxSeriesPerTarget <= 0 {
		bad("max_series_per_target", c.MaxSeriesPerTarget, "must be a whole number > 0")
	}
	if c.MaxWorkersPerTarget <= 0 {
		bad("max_workers_per_target", c.MaxWorkersPerTarget, "must be a whole number > 0")
	}
	if _, err := scrape.ParseCompression(string(c.Compression)); err != nil {
		bad("compression", strconv.Quote(string(c.Compression)), "must be gzip or none")
	}
	if err := page.CheckWorkerLabels(c.WorkerLabels); err != nil {
		path, line := c.at("worker_labels")
		ps = append(ps, fmt.Sprintf("%s: %v%s", path, err, line))
	}
	if c.OutDir == "" {
		bad("out_dir", `""`, "must be a directory path")
	}
	// A step number is at most 2^53 (collector.MaxStep), so a run resumed from 2^53 - 1 is the
	// last that has a step to write.
	if c.ResumeFrom != nil && (*c.ResumeFrom < 0 || *c.ResumeFrom > 1<<53-1) {
		bad("resume_from", *c.ResumeFrom, "must be a step number from 0 to 2^53-1 (the checkpoint's step, after which the run goes on)")
	}
	if c.MetricPrefix == "" || strings.ContainsAny(c.MetricPrefix, " \t\n") {
		bad("metric_prefix", strconv.Quote(c.MetricPrefix), "must be a non-empty name without spaces")
	}
	// Without targets a run waits for them through the API or discovery; without either
	// nothing could ever arrive.
	if c.Enabled && len(c.Targets) == 0 && c.Listen == "" && !c.HasDiscovery() {
		ps = append(ps, fmt.Sprintf("%s: no targets, no file_sd, and no API (listen is \"\") to add them through: give at least one /metrics URL (or host:port)", c.Path("targets")))
	}
	if c.GPU != "" {
		if _, err := vllm.GPUPeak(c.GPU); err != nil {
			path, line := c.at("gpu")
			ps = append(ps, fmt.Sprintf("%s: %v%s", path, err, line))
		}
	}
	// A peak of +Inf made every share 0 and NaN dropped them: neither is a peak.
	if !validPeak(c.PeakTFLOPS) {
		bad("peak_tflops_per_gpu", c.PeakTFLOPS, "must be a finite number of TFLOP/s >= 0 (0: the GPU's, or none)")
	}
	if !validPeak(c.PeakGBps) {
		bad("peak_gbps_per_gpu", c.PeakGBps, "must be a finite number of GB/s >= 0 (0: the GPU's, or none)")
	}
	ps = append(ps, c.validateDiscovery()...)
	if c.Listen != "" {
		host, port, err := net.SplitHostPort(c.Listen)
		switch {
		case err != nil || port == "":
			bad("listen", strconv.Quote(c.Listen), "must be host:port such as 127.0.0.1:9400 (empty: no API)")
		case c.APIToken.Reveal() == "" && !c.AllowInsecureListen && !isLoopback(host):
			bad("listen", strconv.Quote(c.Listen), "without api_token (or VLLMSTAT_API_TOKEN) the API listens only on a loopback address; set a token, or allow_insecure_listen: true")
		}
	}
	ps = append(ps, c.validateTargets()...)
	ps = append(ps, c.validateAllowTargets()...)
	for _, check := range checks {
		var cps Problems
		switch err := check(*c); {
		case errors.As(err, &cps):
			ps = append(ps, cps...)
		case err != nil:
			ps = append(ps, err.Error())
		}
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

// validateTargets normalises the targets and settles their credentials: user info in the URL,
// else the target's own basic_auth or authorization, else the top-level ones. dns+ and dnssrv+
// entries move to DNS. A target is never quoted with its user info.
func (c *Config) validateTargets() Problems {
	var ps Problems
	first := map[string]int{} // index in the list as written
	auth := map[string]target.Auth{}
	dns := map[string]int{}
	static := c.Targets[:0:0]
	defer func() { c.Targets = static }()
	for i, t := range c.Targets {
		at := fmt.Sprintf("%s[%d]", c.Path("targets"), i)
		line := c.targetLine(i)
		if discovery.IsDNS(t.URL) {
			if p := c.dnsTarget(at, t, dns, i); p != "" {
				ps = append(ps, p+line)
			}
			continue
		}
		p, err := target.Parse(t.URL)
		if err != nil {
			ps = append(ps, fmt.Sprintf("%s: %q is not allowed: %v", at, target.Redact(t.URL), err)+line)
			continue
		}
		switch {
		case !p.Auth.IsZero() && !t.Auth.IsZero() && !p.Auth.Equal(t.Auth):
			ps = append(ps, fmt.Sprintf("%s: %q has credentials both in its URL and in basic_auth or authorization; give them once", at, target.Redact(t.URL))+line)
			continue
		case p.Auth.IsZero() && t.Auth.IsZero():
			p.Auth = c.Auth
		case p.Auth.IsZero():
			p.Auth = t.Auth
		}
		if j, dup := first[p.URL]; dup {
			if auth[p.URL].Equal(p.Auth) {
				ps = append(ps, fmt.Sprintf("%s: %q is listed twice", at, target.Redact(t.URL))+line)
			} else {
				ps = append(ps, fmt.Sprintf("%s: %q is %s[%d] with other credentials; a URL is one target with one set of credentials", at, target.Redact(t.URL), c.Path("targets"), j)+line)
			}
			continue
		}
		first[p.URL], auth[p.URL] = i, p.Auth
		static = append(static, p)
	}
	return ps
}

// targetLine returns " (line N)" for a target a file listed, else "".
func (c *Config) targetLine(i int) string {
	if i < len(c.targetLines) && c.targetLines[i] > 0 {
		return fmt.Sprintf(" (line %d)", c.targetLines[i])
	}
	return ""
}

// Load reads the file at path over the defaults. Relative credentials files are relative to
// the file's directory.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return parse(b, filepath.Dir(path))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Peak is the GPU peak the compute keys are shares of: the GPU's, with peak_tflops_per_gpu and
// peak_gbps_per_gpu in its place where given; zero where none is known. The GPU's name is
// checked by Validate.
func (c Config) Peak() vllm.Peak {
	var p vllm.Peak
	if c.GPU != "" {
		p, _ = vllm.GPUPeak(c.GPU)
	}
	if c.PeakTFLOPS > 0 {
		p.TFLOPS = c.PeakTFLOPS
	}
	if c.PeakGBps > 0 {
		p.GBps = c.PeakGBps
	}
	return p
}
