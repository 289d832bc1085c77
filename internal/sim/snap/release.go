package snap

import (
	"fmt"
	"strings"
)

// release is what both the model and the page writers depend on of a vLLM release: the name of
// its page layout, whether its pages carry an engine label (0.8's do not, so they show one
// engine), and whether it exports vllm:engine_sleep_state (vLLM PR #24176, after 0.10), with
// which an engine's ground truth tells its sleep and weight loads apart.
type Release struct {
	Name        string
	EngineLabel bool
	SleepState  bool
}

// parseRelease maps a --vllm-version value to a release; a patch release such as "0.10.2"
// selects its minor version.
func ParseRelease(s string) (Release, error) {
	parts := strings.Split(s, ".")
	if len(parts) >= 2 {
		switch parts[0] + "." + parts[1] {
		case "0.20":
			return Release{Name: "0.20", EngineLabel: true, SleepState: true}, nil
		case "0.10":
			return Release{Name: "0.10", EngineLabel: true}, nil
		case "0.8":
			return Release{Name: "0.8"}, nil
		}
	}
	return Release{}, fmt.Errorf("vllm version %q is not supported: use 0.20 (current names), 0.10 (old and new names side by side) or 0.8 (old names, no engine label)", s)
}
