package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSimSGLangTimeFlags: the switches of SGLang's gauges and stage counters are in `vllmstat
// sim`'s help, and a vLLM fleet refuses them, naming them, before anything starts.
func TestSimSGLangTimeFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runSim(context.Background(), []string{"-h"}, &out, &errb); code != exitOK {
		t.Fatalf("sim -h: exit %d", code)
	}
	for _, want := range []string{"-sglang-eager-gauges", "-sglang-stage-metrics"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sim help lacks %q", want)
		}
	}
	for _, flag := range []string{"--sglang-eager-gauges", "--sglang-stage-metrics"} {
		out.Reset()
		errb.Reset()
		code := runSim(context.Background(), []string{"--engine", "vllm", "--port", "0", flag}, &out, &errb)
		if code == exitOK || !strings.Contains(errb.String(), "sglang-eager-gauges and sglang-stage-metrics are SGLang's") {
			t.Errorf("%s on vLLM: exit %d, stderr %q", flag, code, errb.String())
		}
	}
}
