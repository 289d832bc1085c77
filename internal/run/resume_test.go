package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLastStep(t *testing.T) {
	long := `{"step":%d,"metrics":{"pad":"` + strings.Repeat("x", 100<<10) + `"}}` + "\n"
	tests := []struct {
		name, content string
		n             int64
		ok            bool
	}{
		{"empty", "", 0, false},
		{"one", `{"step":3}` + "\n", 3, true},
		{"cut short by kill -9", `{"step":3}` + "\n" + `{"step":4,"met`, 3, true},
		{"no newline at all", `{"step":4}`, 0, false},
		{"a broken line before", `{"step":2}` + "\n" + "not json\n", 2, true},
		{"step 0", `{"step":0}` + "\n", 0, true},
		{"long lines", fmt.Sprintf(long, 1) + fmt.Sprintf(long, 2) + `{"step":3,"x`, 2, true},
		{"many lines", strings.Repeat(`{"step":1}`+"\n", 20000) + `{"step":77}` + "\n", 77, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "steps.jsonl")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			n, ok, err := lastStep(path)
			if err != nil || n != tt.n || ok != tt.ok {
				t.Fatalf("lastStep = %d, %v, %v; want %d, %v", n, ok, err, tt.n, tt.ok)
			}
		})
	}
	if _, ok, err := lastStep(filepath.Join(t.TempDir(), "none")); ok || err != nil {
		t.Fatalf("missing file: %v, %v", ok, err)
	}
}
