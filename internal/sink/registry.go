package sink

import (
	"fmt"
	"log/slog"

	"github.com/vllmstat/vllmstat/internal/config"
)

// Env is what every sink type gets from the run.
type Env struct {
	OutDir       string // the run's out_dir
	MetricPrefix string // the run's metric prefix, e.g. "vllm"
	Logger       *slog.Logger
	// Resume: the out_dir holds an earlier run's steps, which this run continues (its steps
	// number on after the last one in steps.jsonl, or in a sink's files, see StepKeeper).
	// Sinks then continue what that run wrote (the same W&B run, the same CSV file) rather
	// than start over.
	Resume bool
}

// Caps are what a sink type takes besides step records.
type Caps struct {
	// Images: the sink logs each step's plots, so it gets the records from the prepare stage
	// (the plot drawing) rather than straight from the collector.
	Images bool
	// Intervals: the sink may take every worker's interval values; it implements
	// IntervalSink.
	Intervals bool
}

// Type is a kind of sink that a config may name under sinks:, as the CLI registers them in one
// map by name. Make one with NewType.
type Type struct {
	Caps  Caps
	parse func(Env, config.SinkSpec) (any, error)
	open  func(Env, any) (Sink, error)
}

// NewType registers a sink type by its two steps: parse decodes and checks an entry's settings
// strictly and without side effects (its error is a config.Problems naming every problem with
// its key path), and open creates the sink from them (files, connections; no goroutine).
func NewType[S any](parse func(Env, config.SinkSpec) (S, error), open func(Env, S) (Sink, error), caps Caps) Type {
	return Type{
		Caps:  caps,
		parse: func(e Env, spec config.SinkSpec) (any, error) { return parse(e, spec) },
		open:  func(e Env, set any) (Sink, error) { return open(e, set.(S)) },
	}
}

// Builtin reports whether the type is one the run always writes (steps.jsonl): it has nothing
// to parse or open.
func (t Type) Builtin() bool { return t.open == nil }

// Parse checks spec's settings; it has no side effects.
func (t Type) Parse(env Env, spec config.SinkSpec) (Parsed, error) {
	if t.parse == nil {
		return Parsed{t: t}, nil
	}
	set, err := t.parse(env, spec)
	return Parsed{t: t, set: set}, err
}

// Parsed is a sinks entry whose settings were checked, ready to open.
type Parsed struct {
	t   Type
	set any
}

// Caps are the entry's type's.
func (p Parsed) Caps() Caps { return p.t.Caps }

// Builtin reports whether the entry names what the run always writes (steps.jsonl): its type
// is builtin, or its settings say so (a jsonl entry without a path).
func (p Parsed) Builtin() bool {
	if b, ok := p.set.(interface{ Builtin() bool }); ok {
		return b.Builtin()
	}
	return p.t.Builtin()
}

// Open creates the sink.
func (p Parsed) Open(env Env) (Sink, error) { return p.t.open(env, p.set) }

// Held is the last step that a sink's files hold already, written by the runs before this one.
type Held struct {
	Step int64
	File string // the file that holds it
}

// StepKeeper is implemented by the settings of a sink type whose files keep the step numbers
// written into them (the CSV file, TensorBoard's event files). A run reads them before it opens
// the sinks, so that on an out_dir whose steps.jsonl is gone, or holds fewer steps, it does not
// write those numbers again. LastStep reads the last step the files hold, without changing
// them; ok is false when they hold none.
type StepKeeper interface {
	LastStep() (h Held, ok bool, err error)
}

// LastStep is the last step that the entry's files hold already (see StepKeeper); ok is false
// when they hold none, or its type keeps no step numbers in files of its own.
func (p Parsed) LastStep() (Held, bool, error) {
	if k, ok := p.set.(StepKeeper); ok {
		return k.LastStep()
	}
	return Held{}, false, nil
}

// Cut is what a resume from an earlier step took out of one of a sink's files: how many steps'
// records, kept in Side.
type Cut struct {
	File, Side string
	Records    int
}

// StepCutter is implemented by the settings of a StepKeeper whose files can be cut back to a
// step: CutAfter takes the records of the steps after n out of the files, into files beside them
// that the sink and its readers do not read, so that a run resumed from step n writes n+1 once.
type StepCutter interface {
	CutAfter(n int64) ([]Cut, error)
}

// CutAfter cuts the entry's files back to step n (see StepCutter); nothing for a type that
// keeps no step numbers in files of its own. A StepKeeper that cannot cut is an error, as its
// files would hold the steps after n twice.
func (p Parsed) CutAfter(n int64) ([]Cut, error) {
	if c, ok := p.set.(StepCutter); ok {
		return c.CutAfter(n)
	}
	if _, ok := p.set.(StepKeeper); ok {
		return nil, fmt.Errorf("its files keep step numbers but cannot be cut back to step %d", n)
	}
	return nil, nil
}
