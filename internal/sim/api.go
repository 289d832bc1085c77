package sim

import (
	"github.com/vllmstat/vllmstat/internal/sim/core"
	"github.com/vllmstat/vllmstat/internal/sim/fleetconfig"
	"github.com/vllmstat/vllmstat/internal/sim/fleetmodel"
	"github.com/vllmstat/vllmstat/internal/sim/snap"
	"github.com/vllmstat/vllmstat/internal/sim/workload"
)

// The simulator's public face: the names its callers use, defined in the rooms below (see
// docs/simulator.md, "The simulator's rooms").

// A fleet's configuration (fleetmodel) and its workload (workload).
type (
	Config         = fleetconfig.Config
	WorkloadConfig = workload.WorkloadConfig
	Fault          = fleetconfig.Fault
	FaultKind      = fleetconfig.FaultKind
)

// The engines a fleet can imitate (Config.Engine) and the workloads it can run.
const (
	EngineVLLM      = fleetconfig.EngineVLLM
	EngineSGLang    = fleetconfig.EngineSGLang
	EngineTRTLLM    = fleetconfig.EngineTRTLLM
	WorkloadGRPO    = workload.WorkloadGRPO
	WorkloadPoisson = workload.WorkloadPoisson
	WorkloadNone    = workload.WorkloadNone
	AllServers      = fleetconfig.AllServers
)

// DefaultConfig returns the configuration of `vllmstat sim` without flags.
func DefaultConfig() Config { return fleetconfig.DefaultConfig() }

// DefaultWorkload returns the default GRPO workload.
func DefaultWorkload() WorkloadConfig { return workload.DefaultWorkload() }

// ParseFault parses a --fault value.
func ParseFault(s string) (Fault, error) { return fleetconfig.ParseFault(s) }

// The model, driven directly (NewSim) or through a Fleet.
type (
	Sim       = fleetmodel.Sim
	BatchDone = fleetmodel.BatchDone
	Sample    = fleetmodel.Sample
	Prompt    = core.Prompt
	Event     = core.Event
	EventKind = core.EventKind
)

// Errors of the control calls a driven fleet answers.
var (
	ErrBusy     = fleetmodel.ErrBusy
	ErrNoUpdate = fleetmodel.ErrNoUpdate
)

// BlockSize is the number of tokens per KV-cache block.
const BlockSize = snap.BlockSize

// The colocated loop's edges.
type (
	LoopEdge     = fleetmodel.LoopEdge
	LoopEdgeKind = fleetmodel.LoopEdgeKind
)

const (
	RolloutStart = fleetmodel.RolloutStart
	RolloutEnd   = fleetmodel.RolloutEnd
	Sleep        = fleetmodel.Sleep
	Wake         = fleetmodel.Wake
	EvalStart    = fleetmodel.EvalStart
	EvalEnd      = fleetmodel.EvalEnd
)

// The ground truth: what the simulation did, engine by engine and step by step.
type (
	GroundTruth    = core.GroundTruth
	EngineTruth    = core.EngineTruth
	StepTruth      = core.StepTruth
	State          = core.State
	Publish        = core.Publish
	VersionChange  = core.VersionChange
	RequestLengths = core.RequestLengths
)

const (
	StateGenerating     = core.StateGenerating
	StateIdle           = core.StateIdle
	StateAsleep         = core.StateAsleep
	StateWaking         = core.StateWaking
	StatePaused         = core.StatePaused
	StateLoadingWeights = core.StateLoadingWeights
	NumStates           = core.NumStates
	NoVersion           = snap.NoVersion
)
