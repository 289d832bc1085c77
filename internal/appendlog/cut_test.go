package appendlog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCutLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "steps.csv")
	big := func(line []byte) bool { return bytes.HasPrefix(line, []byte("9")) }
	if side, n, err := CutLines(path, big); side != "" || n != 0 || err != nil {
		t.Fatalf("a file that does not exist: %q, %d, %v", side, n, err)
	}
	if err := os.WriteFile(path, []byte("step,x\n1,a\n9,b\n2,c\n9,d"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".cut-1", []byte("an earlier cut\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	side, n, err := CutLines(path, big)
	if err != nil || n != 2 || side != path+".cut-2" {
		t.Fatalf("CutLines = %q, %d, %v; want 2 lines in %s.cut-2", side, n, err, path)
	}
	for file, want := range map[string]string{path: "step,x\n1,a\n2,c\n", side: "9,b\n9,d", path + ".cut-1": "an earlier cut\n"} {
		if b, err := os.ReadFile(file); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", file, b, err, want)
		}
	}
	if side, n, err := CutLines(path, big); side != "" || n != 0 || err != nil {
		t.Errorf("nothing to cut: %q, %d, %v", side, n, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the replacement's temporary file is left: %v", err)
	}
}
