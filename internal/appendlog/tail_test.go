package appendlog

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCutPartialLine(t *testing.T) {
	long := strings.Repeat("x", 150<<10) // read back over more than one block
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"whole lines", "a\nb\n", "a\nb\n"},
		{"partial last line", "a\nb\npart", "a\nb\n"},
		{"only a partial line", "part", ""},
		{"long partial line", "a\n" + long, "a\n"},
		{"long whole line", long + "\n", long + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tail, err := LastLine(f)
			if err != nil || string(tail) != tt.in[len(tt.want):] {
				t.Fatalf("LastLine: %d bytes (%v), want %d", len(tail), err, len(tt.in)-len(tt.want))
			}
			n, err := CutPartialLine(f, path)
			if err != nil || n != len(tt.in)-len(tt.want) {
				t.Fatalf("cut %d bytes (%v), want %d", n, err, len(tt.in)-len(tt.want))
			}
			// The next line written starts a line of its own.
			if _, err := f.Seek(0, io.SeekEnd); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("next\n"); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); string(b) != tt.want+"next\n" {
				t.Errorf("file ends %q, want %q", b[max(0, len(b)-20):], (tt.want + "next\n")[max(0, len(tt.want)+5-20):])
			}
		})
	}
}

func TestLastWholeLine(t *testing.T) {
	long := strings.Repeat("x", 150<<10)
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"no newline", "part", ""},
		{"one line", "a\n", "a\n"},
		{"before a partial line", "a\nb\npart", "b\n"},
		{"last of whole lines", "a\nb\n", "b\n"},
		{"blank", "a\n\n", "\n"},
		{"long, before a long partial line", "a\n" + long + "\n" + long, long + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := LastWholeLine(f)
			if err != nil || string(got) != tt.want {
				t.Fatalf("LastWholeLine: %d bytes %q (%v), want %d", len(got), got[:min(len(got), 20)], err, len(tt.want))
			}
		})
	}
}

func TestKeepAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	for i, b := range []string{"first\n", "second"} {
		kept, err := KeepAside(path, []byte(b))
		want := path + ".corrupt-" + string(rune('1'+i))
		if err != nil || kept != want {
			t.Fatalf("KeepAside = %q, %v; want %q", kept, err, want)
		}
		if got, _ := os.ReadFile(kept); string(got) != b {
			t.Errorf("%s holds %q, want %q", kept, got, b)
		}
	}
	if _, err := KeepAside(filepath.Join(path, "no-dir", "f"), []byte("x")); err == nil || !strings.Contains(err.Error(), "keep what was taken out of") {
		t.Errorf("unwritable directory: %v", err)
	}
}
