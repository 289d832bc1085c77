package pyfloat

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/testkit"
)

func TestPyRepr(t *testing.T) {
	// Expected strings are what CPython's repr() prints for these floats.
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{42, "42.0"},
		{-2.5, "-2.5"},
		{0.1, "0.1"},
		{0.0001, "0.0001"},
		{0.00001, "1e-05"},
		{0.000015, "1.5e-05"},
		{9.75010481363281e-06, "9.75010481363281e-06"},
		{123456, "123456.0"},
		{33636352, "33636352.0"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{1.5e16, "1.5e+16"},
		{1.2345e300, "1.2345e+300"},
		{5e-324, "5e-324"},
		{0.09000000000000001, "0.09000000000000001"},
		{439.71999999999997, "439.71999999999997"},
		{0.30000000000000004, "0.30000000000000004"},
		{1795998522.4085736, "1795998522.4085736"},
		{math.Inf(1), "inf"},
		{math.NaN(), "nan"},
	}
	for _, tt := range tests {
		if got := Repr(tt.v); got != tt.want {
			t.Errorf("Repr(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestGoFloat(t *testing.T) {
	// Expected strings as prometheus_client prints them (taken from the fixture pages where
	// possible).
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0.0"},
		{1, "1.0"},
		{20000, "20000.0"},
		{123456, "123456.0"},
		{654321, "654321.0"},
		{1234567, "1.234567e+06"},
		{1000000, "1e+06"},
		{1048576, "1.048576e+06"},
		{33636352, "3.3636352e+07"},
		{27144192, "2.7144192e+07"},
		{1796002121.59, "1.79600212159e+09"},
		{1795998522.4085736, "1.7959985224085736e+09"},
		{1753795326.935825, "1.753795326935825e+09"},
		{12345678901, "1.2345678901e+010"},
		{0.35000000000000003, "0.35000000000000003"},
		{9.75010481363281e-06, "9.75010481363281e-06"},
		{-12345678, "-12345678.0"},
		{math.Inf(1), "+Inf"},
		{math.Inf(-1), "-Inf"},
		{math.NaN(), "NaN"},
	}
	for _, tt := range tests {
		if got := FormatGo(tt.v); got != tt.want {
			t.Errorf("FormatGo(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// TestGoFloatFixtureValues re-prints every sample value and "le" label of the pages Python
// printed (vLLM's, prometheus_client's renders, the simulator's golden pages) and expects the
// page's own text back. llm-d's simulator is written in Go: its page is not one of them.
func TestGoFloatFixtureValues(t *testing.T) {
	files, _ := filepath.Glob("../sim/*/testdata/*.prom") // the page writers' golden pages
	if len(files) == 0 {
		t.Fatal("no pages in the simulator's testdata")
	}
	files = append(files, testkit.Fixtures(t, "prometheus-client-render-*.prom")...)
	files = append(files, testkit.Fixtures(t, "vllm-*.prom")...)
	n := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			texts := []string{line[strings.LastIndexByte(line, ' ')+1:]}
			if i := strings.Index(line, `le="`); i >= 0 {
				rest := line[i+4:]
				texts = append(texts, rest[:strings.IndexByte(rest, '"')])
			}
			for _, text := range texts {
				v, err := strconv.ParseFloat(text, 64)
				if err != nil {
					t.Fatalf("%s: parse %q: %v", file, text, err)
				}
				if got := FormatGo(v); got != text {
					t.Errorf("%s: FormatGo(%v) = %q, fixture has %q", file, v, got, text)
				}
				n++
			}
		}
		f.Close()
	}
	if n < 1000 {
		t.Fatalf("checked only %d values", n)
	}
}
