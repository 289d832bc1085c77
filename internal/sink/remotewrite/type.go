package remotewrite

import (
	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
)

// Type is the remote_write sink's entry in the sink registry: it takes interval values.
var Type = sink.NewType(
	func(_ sink.Env, spec config.SinkSpec) (Settings, error) { return ParseSettings(spec) },
	func(e sink.Env, set Settings) (sink.Sink, error) {
		return NewWithSettings(set, e.MetricPrefix, e.Logger), nil
	},
	sink.Caps{Intervals: true})

var (
	_ sink.IntervalSink = (*Writer)(nil)
	_ sink.Starter      = (*Writer)(nil)
	_ sink.Backoffer    = (*Writer)(nil)
)
