package timeline

import (
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/step"
)

func TestLabels(t *testing.T) {
	ids := func(targets ...string) []step.WorkerID {
		var out []step.WorkerID
		for _, tg := range targets {
			target, engine, _ := strings.Cut(tg, "#")
			out = append(out, step.WorkerID{Target: target, Engine: engine})
		}
		return out
	}
	for _, tt := range []struct {
		name  string
		ids   []step.WorkerID
		width int
		want  []string
	}{
		{"short names stay", ids("http://h:8000/metrics", "https://h:8001/metrics#3"), 12, []string{"h:8000", "h:8001#3"}},
		{"a shared start goes", ids("http://10.0.0.1:8000/metrics#0", "http://10.0.0.12:8000/metrics#0"), 10, []string{"…1:8000#0", "…12:8000#0"}},
		{"then a shared end", ids("http://node-001.cluster.example:8000/metrics", "http://node-002.cluster.example:8000/metrics"), 10, []string{"…001…", "…002…"}},
		{"else the middle", ids("http://0123456789abcdefghij:8000/metrics"), 12, []string{"012…hij:8000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Labels(tt.ids, tt.width)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Labels = %q, want %q", got, tt.want)
			}
		})
	}
}
