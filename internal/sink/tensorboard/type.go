package tensorboard

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
)

// Type is the tensorboard sink's entry in the sink registry: it logs images.
var Type = sink.NewType(
	func(e sink.Env, spec config.SinkSpec) (Settings, error) { return decodeSettings(e.OutDir, spec) },
	func(e sink.Env, set Settings) (sink.Sink, error) {
		return openSettings(e, set, time.Now())
	},
	sink.Caps{Images: true})

var _ sink.Sink = (*Writer)(nil)
