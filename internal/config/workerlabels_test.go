package config

import (
	"slices"
	"strings"
	"testing"
)

func TestWorkerLabels(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string // nil: an error containing err
		err        string
	}{
		{"default", "targets: [h:1]\n", []string{"ReplicaId", "WorkerId"}, ""},
		{"none", "targets: [h:1]\nworker_labels: []\n", []string{}, ""},
		{"one", "targets: [h:1]\nworker_labels: [ReplicaId]\n", []string{"ReplicaId"}, ""},
		{"in the vllmstat section", "vllmstat:\n  targets: [h:1]\n  worker_labels:\n    - WorkerId\n", []string{"WorkerId"}, ""},
		{"not a list", "targets: [h:1]\nworker_labels: ReplicaId\n", nil, "worker_labels (line 2): must be a list of label names"},
		{"not a name", "targets: [h:1]\nworker_labels: [ReplicaId, {a: b}]\n", nil, "worker_labels[1] (line 2): must be a label name"},
		{"engine", "targets: [h:1]\nworker_labels: [engine]\n", nil, `worker_labels: "engine" cannot be a worker label`},
		{"bad name", "targets: [h:1]\nworker_labels: [Replica-Id]\n", nil, `worker_labels: "Replica-Id" is not a label name`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if err == nil {
				err = c.Validate()
			}
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// An empty list stays a list: it means no worker labels, where nil means the default.
			if !slices.Equal(c.WorkerLabels, tt.want) || c.WorkerLabels == nil {
				t.Errorf("worker labels %q, want %q", c.WorkerLabels, tt.want)
			}
		})
	}
}
