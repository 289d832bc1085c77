package tensorboard

import (
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
)

// settings are what a tensorboard entry of sinks: may set.
type settings struct {
	// images writes the step's timeline plots as image summaries.
	images bool
	// perWorker adds one scalar per worker and key, tagged "<key>/<worker>".
	perWorker bool
	// dir receives the event file; TensorBoard's --logdir points at it or a parent.
	dir string
}

const allowedKeys = "type, images, per_worker, dir"

// decodeSettings reads spec's mapping strictly and reports every problem at once, each with its
// key path, so that a typo fails the start instead of being ignored.
func decodeSettings(outDir string, spec config.SinkSpec) (settings, error) {
	s := settings{images: true, dir: filepath.Join(outDir, "tensorboard")}
	n := spec.Settings
	if n == nil {
		return s, nil
	}
	if n.Kind != yaml.MappingNode {
		return s, config.Problems{fmt.Sprintf("%s (line %d): must be a mapping such as {type: tensorboard, images: false}", spec.Path, n.Line)}
	}
	var ps config.Problems
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := spec.Path + "." + k.Value
		bad := func(allowed string) {
			ps = append(ps, fmt.Sprintf("%s (line %d): %s is not allowed: %s", path, v.Line, show(v), allowed))
		}
		switch k.Value {
		case "type":
		case "images", "per_worker":
			var b bool
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&b) != nil {
				bad("must be true or false")
				continue
			}
			if k.Value == "images" {
				s.images = b
			} else {
				s.perWorker = b
			}
		case "dir":
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || strings.TrimSpace(v.Value) == "" {
				bad("must be a directory path (default OUT_DIR/tensorboard)")
				continue
			}
			s.dir = v.Value
		default:
			ps = append(ps, fmt.Sprintf("%s (line %d): unknown setting of a tensorboard sink: the settings are %s", path, k.Line, allowedKeys))
		}
	}
	if len(ps) > 0 {
		return s, ps
	}
	return s, nil
}

// show quotes a scalar and names any other node, for messages.
func show(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", v.Value)
}
