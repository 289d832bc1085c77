package sink

import "testing"

func TestWorkerKey(t *testing.T) {
	for _, tt := range []struct{ target, engine, want string }{
		{"http://10.0.0.7:8000/metrics", "0", "k/10.0.0.7:8000/0"},
		{"http://10.0.0.7:8000/metrics", "", "k/10.0.0.7:8000"},
		{"https://gpu-3:9000/vllm/metrics", "", "k/gpu-3:9000_vllm"},
		{"not a url", "e", "k/not a url/e"},
	} {
		if got := WorkerKey("k", tt.target, tt.engine); got != tt.want {
			t.Errorf("WorkerKey(%q, %q) = %q, want %q", tt.target, tt.engine, got, tt.want)
		}
	}
}
