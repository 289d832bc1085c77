package sink

import "testing"

func TestWorkerKey(t *testing.T) {
	for _, tt := range []struct {
		target, engine string
		labels         map[string]string
		want           string
	}{
		{"http://10.0.0.7:8000/metrics", "0", nil, "k/10.0.0.7:8000/0"},
		{"http://10.0.0.7:8000/metrics", "", nil, "k/10.0.0.7:8000"},
		{"https://gpu-3:9000/vllm/metrics", "", nil, "k/gpu-3:9000_vllm"},
		{"not a url", "e", nil, "k/not a url/e"},
		{"http://10.0.0.5:8080/metrics", "0", map[string]string{"WorkerId": "w1", "ReplicaId": "r1"}, "k/10.0.0.5:8080/0/ReplicaId=r1,WorkerId=w1"},
	} {
		if got := WorkerKey("k", tt.target, tt.engine, tt.labels); got != tt.want {
			t.Errorf("WorkerKey(%q, %q) = %q, want %q", tt.target, tt.engine, got, tt.want)
		}
	}
}
