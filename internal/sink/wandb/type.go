package wandb

import (
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/sink"
)

// Type is the wandb sink's entry in the sink registry: it logs images.
var Type = sink.NewType(
	func(_ sink.Env, spec config.SinkSpec) (Settings, error) { return decodeSettings(spec) },
	func(e sink.Env, set Settings) (sink.Sink, error) {
		return openSettings(e, set, time.Now())
	},
	sink.Caps{Images: true})

var _ sink.Sink = (*Writer)(nil)
