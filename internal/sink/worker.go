package sink

import (
	"net/url"
	"strings"
)

// WorkerKey is the key of a per-worker metric: the key, then the target without scheme and
// /metrics path, then the engine when there is one, e.g. "vllm/num_preemptions/10.0.0.7:8000/1".
// The TensorBoard and W&B sinks both name workers with it, so that both trackers show the same
// names.
func WorkerKey(key, target, engine string) string {
	w := target
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		w = u.Host
		if p := strings.Trim(strings.TrimSuffix(u.Path, "/metrics"), "/"); p != "" {
			w += "_" + strings.ReplaceAll(p, "/", "_")
		}
	}
	if engine != "" {
		w += "/" + engine
	}
	return key + "/" + w
}
