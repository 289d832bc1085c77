package sink

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// WorkerKey is the key of a per-worker metric: the key, then the target without scheme and
// /metrics path, then the engine when there is one, then the worker labels (Ray's ReplicaId,
// WorkerId) when there are any, e.g. "vllm/num_preemptions/10.0.0.7:8000/1" or
// "vllm/num_preemptions/10.0.0.7:8080/0/ReplicaId=a,WorkerId=b". The TensorBoard and W&B sinks
// both name workers with it, so that both trackers show the same names.
func WorkerKey(key, target, engine string, labels map[string]string) string {
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
	if len(labels) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			kv = append(kv, k+"="+labels[k])
		}
		w += "/" + strings.Join(kv, ",")
	}
	return key + "/" + w
}
