package fleetconfig

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/vllmstat/vllmstat/internal/clock"
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// The router's policies the simulator imitates (Config.RouterPolicy), by the names of SGLang's
// router.
const (
	RouterRoundRobin = "round_robin"
	RouterCacheAware = "cache_aware"
)

// The engines a fleet can imitate (Config.Engine).
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
	EngineTRTLLM = "trtllm"
)

// Config describes a simulated fleet: Servers API servers, each on its own port with DP
// data-parallel engines behind it.
type Config struct {
	// Engine is the inference engine whose pages the servers serve: "vllm" (the default),
	// "sglang" (see sglang.go) or "trtllm" (trtllm-serve's, see internal/sim/trtllmpage). The engines behind the pages are the same model either way.
	Engine string
	// Servers is the number of API servers (scrape targets).
	Servers int
	// DP is the number of data-parallel engines per server; each shows on the server's page
	// under its own engine label, "0" to DP-1.
	DP int
	// Host is the address the servers listen on.
	Host string
	// Port is server 0's port; server i listens on Port+i. 0 picks free ports.
	Port int
	// Version is the vLLM release whose page layout to imitate: "0.20", "0.10" or "0.8"
	// (a patch release such as "0.10.2" selects its minor version's layout). An SGLang fleet
	// has SGLang's layout whatever it is.
	Version string
	// DecodeLogInterval is SGLang's --decode-log-interval: its scheduler sets its gauges every
	// that many decode batches (and at every prefill batch).
	DecodeLogInterval int
	// SGLangEagerGauges makes the SGLang schedulers set their gauges at the end of every
	// iteration and as soon as they go idle, as vLLM does, instead of at SGLang's log points
	// only: a page's running requests are then the engine's.
	SGLangEagerGauges bool
	// SGLangStageMetrics serves SGLang's scheduler_stage_seconds_total{category} and
	// scheduler_idle_seconds_total (SGLang PRs #37636 and #37461), counted from the engine's own
	// clock (see sglangStageTimes).
	SGLangStageMetrics bool
	// APIServerCount is vLLM's --api-server-count: above 1 a server's API server processes
	// share their metrics through prometheus_client's multiprocess mode, and its page is the
	// multiprocess collector's (multiproc.go). vLLM 0.20 pages only.
	APIServerCount int
	// Router puts SGLang's router in front of an SGLang fleet, on port Port+Servers: its
	// /engine_metrics merges every server's page, it routes /generate and the OpenAI requests
	// to the servers by RouterPolicy, and its /metrics is its own (see serve/router.go).
	Router bool
	// RouterPolicy is the router's --policy: RouterRoundRobin (the default) or RouterCacheAware.
	RouterPolicy string
	// Priority is SGLang's --enable-priority-scheduling: a request's priority is 0 or 1 (its ID's
	// parity), every scheduler series is labelled priority="", and the running and queue gauges
	// come per priority too, their totals under priority="" (see sglang.go).
	Priority bool
	// VersionTag, when set (such as "step-"), makes the servers answer their weight version as
	// strings, as vLLM and SGLang keep it: "default" before the first load (a vLLM server too,
	// as vLLM's EngineCore starts with it), and version N as VersionTag followed by N. Their
	// control calls take such a string for a version too. "" answers numbers, as before.
	VersionTag string
	// Seed makes the workload, and with it every simulated event, repeatable.
	Seed int64
	// Speed is simulated seconds per wall second.
	Speed float64
	// Model is the served model name, the model_name label.
	Model string
	// Workload is what the fleet is asked to do.
	Workload workload.WorkloadConfig
	// Faults are misbehaviours scheduled at wall-clock offsets from the start.
	Faults []Fault
	// BlocksPerEngine is each engine's KV cache size in blocks of BlockSize tokens. Far smaller
	// than a real GPU's so that the cache fills and preempts at demo scale.
	BlocksPerEngine int
	// MaxNumSeqs caps each engine's running batch (vLLM's --max-num-seqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens is each iteration's token budget (vLLM's --max-num-batched-tokens).
	MaxNumBatchedTokens int
	// MaxModelLen bounds a request's length and sets the token-count histogram buckets.
	MaxModelLen int
	// Cost is the iteration cost model.
	Cost core.CostModel
	// SpecDecode is the number of speculative tokens a draft model proposes per decode step
	// (vLLM's num_speculative_tokens); 0 turns speculative decoding off. With it on, pages gain
	// vLLM's spec_decode_* counters.
	SpecDecode int
	// KVConnector gives the fleet an external prefix cache that every engine saves its blocks
	// to and loads its local misses from (see externalCache), as a KV connector does.
	KVConnector bool
	// MFUMetrics serves vLLM's estimated FLOPs and bytes per GPU (--enable-mfu-metrics), of the
	// model Compute describes, on 0.20 pages (see compute.go).
	MFUMetrics bool
	// Compute is the model the MFU counters estimate the work of.
	Compute core.ComputeModel
	// KVCacheMetrics serves vLLM's KV block residency histograms (--kv-cache-metrics) on 0.20
	// pages, every block sampled.
	KVCacheMetrics bool
	// SlowDelay is how long /metrics takes to answer during a slow fault.
	SlowDelay time.Duration
	// Tick is how often the fleet catches the simulation up with the wall clock and publishes
	// new pages.
	Tick time.Duration
	// Logger receives state transitions (server up/down, restarts, batches); nil discards them.
	Logger *slog.Logger
	// Clock is the wall clock the fleet paces itself by and times faults with; nil means the
	// real one. Tests inject a fake one.
	Clock clock.Clock
	// WaitForDriver makes the fleet wait at its start (time 0) for a first Fleet.Resume, and stop
	// its simulated time at each edge of a colocated loop it delivers (Fleet.Edges), or outside
	// that loop at the end of each batch (Fleet.Batches), until the reader has called Fleet.Resume
	// for each: a driver that ends a step or marks a phase there then sees the fleet as that moment
	// left it, however late it acts on a loaded machine. A fleet behind the wall clock catches up a
	// tick at a time, so that it stops within a tick of the moment. The pages keep being served
	// meanwhile, unchanged, and the times they show (a series' _created, a sleep's start) lag the
	// wall clock by the time held so far, and calls of the servers' control endpoints wait until
	// the fleet goes on; planned server faults keep to the wall clock, so a fleet with faults
	// should not wait.
	WaitForDriver bool
}

// DefaultConfig returns the configuration of `vllmstat sim` without flags: two servers with one
// engine each, a GRPO workload, vLLM 0.20's page layout.
func DefaultConfig() Config {
	return Config{
		Engine:              EngineVLLM,
		DecodeLogInterval:   core.DefaultDecodeLogInterval,
		Servers:             2,
		DP:                  1,
		Host:                "127.0.0.1",
		Port:                8100,
		Version:             "0.20",
		Seed:                1,
		Speed:               1,
		Model:               "Qwen/Qwen3-1.7B",
		Workload:            workload.DefaultWorkload(),
		BlocksPerEngine:     768,
		MaxNumSeqs:          48,
		MaxNumBatchedTokens: 8192,
		MaxModelLen:         4096,
		Cost:                core.DefaultCostModel(),
		Compute:             core.DefaultComputeModel(),
		SlowDelay:           5 * time.Second,
		Tick:                20 * time.Millisecond,
		RouterPolicy:        RouterRoundRobin,
	}
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Servers < 1 {
		bad("servers must be at least 1, got %d", c.Servers)
	}
	if c.DP < 1 {
		bad("dp must be at least 1, got %d", c.DP)
	}
	if c.Port < 0 || c.Port > 65535 || (c.Port > 0 && c.Port+c.Servers-1 > 65535) {
		bad("port %d does not leave room for %d servers below 65536", c.Port, c.Servers)
	}
	switch c.Engine {
	case EngineVLLM, "":
		r, err := snap.ParseRelease(c.Version)
		if err != nil {
			errs = append(errs, err)
		} else if !r.EngineLabel && c.DP > 1 {
			bad("vllm version %s pages have no engine label, so they can show only one engine: use dp 1", c.Version)
		}
	case EngineSGLang:
	case EngineTRTLLM:
		c.validateTRTLLM(bad)
	default:
		bad("engine %q is not simulated: use vllm, sglang or trtllm", c.Engine)
	}
	c.validateAPIServers(bad)
	if c.Router && c.Engine != EngineSGLang {
		bad("a router is SGLang's: use it with engine sglang")
	}
	switch c.RouterPolicy {
	case RouterRoundRobin, RouterCacheAware, "":
	default:
		bad("router-policy %q is not simulated: use %s or %s", c.RouterPolicy, RouterRoundRobin, RouterCacheAware)
	}
	if c.Priority && c.Engine != EngineSGLang {
		bad("priority scheduling is SGLang's: use it with engine sglang")
	}
	if (c.SGLangEagerGauges || c.SGLangStageMetrics) && c.Engine != EngineSGLang {
		bad("sglang-eager-gauges and sglang-stage-metrics are SGLang's: use them with engine sglang")
	}
	if c.Port > 0 && c.Router && c.Port+c.Servers > 65535 {
		bad("port %d does not leave room for %d servers and the router below 65536", c.Port, c.Servers)
	}
	if t := c.VersionTag; t != "" && (len(t) > 64 || strings.ContainsFunc(t, func(r rune) bool { return !unicode.IsPrint(r) }) || t[len(t)-1] >= '0' && t[len(t)-1] <= '9') {
		bad("version tag %q must be at most 64 printable bytes that do not end in a digit", t)
	}
	if !(c.Speed > 0) || math.IsInf(c.Speed, 0) {
		bad("speed must be a positive number, got %v", c.Speed)
	}
	if c.Model == "" {
		bad("model name must not be empty")
	}
	ec := c.EngineConfig()
	if err := ec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if ec.MaxModelLen >= 1e7 {
		bad("max model len must be below 10000000, got %d", c.MaxModelLen)
	}
	if c.Cost.StepOverhead <= 0 || c.Cost.PerPrefillToken < 0 || c.Cost.PerDecodeRequest < 0 || c.Cost.PerContextToken < 0 {
		bad("cost model needs a positive step overhead and non-negative per-token costs")
	}
	// The compute model is checked whether or not vLLM's MFU counters are served: SGLang's pages
	// serve theirs from it, and a setting given is a setting meant.
	if err := c.Compute.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Workload.Validate(c.MaxModelLen); err != nil {
		errs = append(errs, err)
	}
	for _, f := range c.Faults {
		if f.Server != AllServers && (f.Server < 0 || f.Server >= c.Servers) {
			bad("fault %s aims at server %d, but servers are numbered 0 to %d", f, f.Server, c.Servers-1)
		}
	}
	if c.SlowDelay < 0 {
		bad("slow delay must not be negative, got %s", c.SlowDelay)
	}
	if c.Tick <= 0 {
		bad("tick must be positive, got %s", c.Tick)
	}
	return errors.Join(errs...)
}

func (c Config) EngineConfig() core.EngineConfig {
	return core.EngineConfig{
		NumBlocks:           c.BlocksPerEngine,
		MaxNumSeqs:          c.MaxNumSeqs,
		MaxNumBatchedTokens: c.MaxNumBatchedTokens,
		MaxModelLen:         c.MaxModelLen,
		Cost:                c.Cost,
		SpecTokens:          c.SpecDecode,
		SGLang:              c.Engine == EngineSGLang,
		TRTLLM:              c.Engine == EngineTRTLLM,
		DecodeLogInterval:   c.DecodeLogInterval,
		EagerLog:            c.SGLangEagerGauges,
		Priority:            c.Priority,
		MFU:                 c.MFUMetrics,
		Compute:             c.Compute,
		KVMetrics:           c.KVCacheMetrics && c.Engine != EngineSGLang && c.Engine != EngineTRTLLM,
	}
}

// syncsWeights reports whether the fleet runs a loop that syncs weights, colocated or async, or
// is driven by its clients, who may: its vLLM servers run in dev mode, with the RL families and
// /weight_info.
func (c Config) SyncsWeights() bool {
	return c.Workload.Colocated || c.Workload.Async || c.Workload.Kind == workload.WorkloadNone
}

// simTime converts a wall-clock offset to simulated time.
func (c Config) SimTime(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * c.Speed)
}

// wallTime converts simulated time to a wall-clock offset.
func (c Config) WallTime(sim time.Duration) time.Duration {
	return time.Duration(float64(sim) / c.Speed)
}
