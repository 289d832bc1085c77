package simtest

import (
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
)

// ColocatedConfig is the demo's fleet in the colocated loop: 2 servers x 2 engines, an eval
// batch every second step, four steps.
func ColocatedConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Colocated = true
	cfg.Workload.EvalEvery = 2
	cfg.Workload.Batches = 4
	return cfg
}

// SyncedColocatedConfig is the colocated loop with a wake-up and a load that take time.
func SyncedColocatedConfig() fleetconfig.Config {
	cfg := ColocatedConfig()
	cfg.Workload.WakeTime = time.Second
	cfg.Workload.LoadTime = 2 * time.Second
	cfg.Workload.TrainTime = 3 * time.Second
	cfg.Workload.Batches = 3
	return cfg
}

// AsyncConfig is two servers of two vLLM engines in the async loop: a publish every 10 s, loads
// of 2 s, one engine 3 s late; GRPO batches one after another.
func AsyncConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.DP = 2
	cfg.Workload.Async = true
	cfg.Workload.StepTime = 10 * time.Second
	cfg.Workload.Lag = 3 * time.Second
	cfg.Workload.LoadTime = 2 * time.Second
	cfg.Workload.Pause = 0
	return cfg
}

// VersionConfig is the default fleet with the pages of vLLM version: two engines a server, one
// for 0.8.
func VersionConfig(version string) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Version = version
	cfg.DP = 2
	if version == "0.8" {
		cfg.DP = 1
	}
	return cfg
}

// GoldenConfig renders pages with the fixtures' model name and KV cache size so that label
// values can be compared too.
func GoldenConfig(version string) fleetconfig.Config {
	cfg := VersionConfig(version)
	cfg.BlocksPerEngine = 46080
	cfg.Model = "Qwen/Qwen3-1.7B"
	return cfg
}

// SGLangConfig is a fleet of SGLang servers with the fixtures' model and a KV cache small enough
// that a batch retracts requests.
func SGLangConfig(servers, dp int) fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Engine = fleetconfig.EngineSGLang
	cfg.Servers, cfg.DP = servers, dp
	cfg.Model = "Qwen/Qwen3-1.7B"
	cfg.BlocksPerEngine = 640 // small enough to retract
	return cfg
}

// FastConfig is a small fleet on free ports running 20x faster than the wall clock: a GRPO
// batch takes about half a second.
func FastConfig() fleetconfig.Config {
	cfg := fleetconfig.DefaultConfig()
	cfg.Port = 0
	cfg.DP = 2
	cfg.Speed = 20
	cfg.Tick = 5 * time.Millisecond
	cfg.Workload.StartDelay = 100 * time.Millisecond
	cfg.Workload.Pause = 200 * time.Millisecond
	return cfg
}

// Build calls build with cfg, failing t on an error.
func Build[S any](t testing.TB, build func(fleetconfig.Config) (S, error), cfg fleetconfig.Config) S {
	t.Helper()
	s, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
