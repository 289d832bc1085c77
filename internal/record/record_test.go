package record

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"rec.jsonl", "rec.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			w, err := Create(path, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ts := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
			body := "vllm:num_requests_running{engine=\"0\"} 1.0\n\"quoted\" \\ \u00e9"
			must(t, w.Scrape(ts, "http://a:1/metrics", []byte(body), nil))
			must(t, w.Scrape(ts.Add(1), "http://b:1/metrics", nil, errors.New("connection refused")))
			must(t, w.StepEnd(ts.Add(2), 7))
			must(t, w.Added(ts.Add(3), "http://c:1/metrics"))
			must(t, w.Scrape(ts.Add(4), "http://c:1/metrics", nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED)))
			must(t, w.Close())

			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			e1, _ := r.Next()
			e2, _ := r.Next()
			e3, _ := r.Next()
			e4, _ := r.Next()
			e5, _ := r.Next()
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("want EOF, got %v", err)
			}
			if e1.Kind != KindScrape || *e1.Body != body || !e1.TS.Equal(ts) || e1.Target != "http://a:1/metrics" {
				t.Errorf("event 1: %+v", e1)
			}
			if e2.Error != "connection refused" || e2.Refused || e2.Body != nil || !e2.TS.Equal(ts.Add(1)) {
				t.Errorf("event 2: %+v", e2)
			}
			if e3.Kind != KindStep || e3.Step != 7 || !e3.TS.Equal(ts.Add(2)) {
				t.Errorf("event 3: %+v", e3)
			}
			if e4.Kind != KindAdd || e4.Target != "http://c:1/metrics" || !e4.TS.Equal(ts.Add(3)) {
				t.Errorf("event 4: %+v", e4)
			}
			if e5.Error != "dial: "+syscall.ECONNREFUSED.Error() || !e5.Refused {
				t.Errorf("event 5: %+v", e5)
			}
		})
	}
}

func TestTimestampsHaveFraction(t *testing.T) {
	var b strings.Builder
	e := Event{Kind: KindStep, TS: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Step: 1}
	out, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	b.Write(out)
	if !strings.Contains(b.String(), `"ts":"2026-01-01T00:00:00.000000000Z"`) {
		t.Fatalf("got %s", b.String())
	}
}

func TestBadLines(t *testing.T) {
	tests := []struct {
		name, in string
		errHas   string
		warned   int
		events   int
	}{
		{"not json", `{"kind":"step","ts":"2026-01-01T00:00:00Z","step":1}` + "\n{oops\n", "line 2: not a valid event", 0, 1},
		{"scrape without target", `{"kind":"scrape","ts":"2026-01-01T00:00:00Z","body":"x"}`, "line 1: scrape without target", 0, 0},
		{"unknown kind skipped", `{"kind":"note","ts":"2026-01-01T00:00:00Z"}` + "\n" + `{"kind":"step","ts":"2026-01-01T00:00:00Z","step":1}`, "", 1, 1},
		{"no ts", `{"kind":"step","step":1}`, "line 1: event without ts", 0, 0},
		{"out of order", `{"kind":"step","ts":"2026-01-01T00:00:02Z","step":1}` + "\n" + `{"kind":"step","ts":"2026-01-01T00:00:01Z","step":2}`,
			"line 2: ts 2026-01-01T00:00:01.000000000Z is earlier than ts 2026-01-01T00:00:02.000000000Z of line 1", 0, 1},
		{"equal times allowed", `{"kind":"step","ts":"2026-01-01T00:00:02Z","step":1}` + "\n" + `{"kind":"step","ts":"2026-01-01T00:00:02Z","step":2}`, "", 0, 2},
		{"cut short", `{"kind":"step","ts":"2026-01-01T00:00:02Z","step":1}` + "\n" + `{"kind":"step","ts":"2026-01-01T00`, "", 1, 1},
		{"bad last line with newline is an error", `{"kind":"step","ts":"2026-01-01T00:00:02Z","step":1}` + "\n" + `{"kind":"step","ts":"2026-01-01T00` + "\n", "line 2: not a valid event", 0, 1},
		{"gap", `{"kind":"gap","ts":"2026-01-01T00:00:02Z","since":"2026-01-01T00:00:01Z","events":3}`, "", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in))
			warned := 0
			r.Warn = func(int, string) { warned++ }
			n := 0
			var err error
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
				n++
			}
			if tt.errHas == "" && err != io.EOF || tt.errHas != "" && (err == nil || !strings.Contains(err.Error(), tt.errHas)) {
				t.Errorf("err = %v, want %q", err, tt.errHas)
			}
			if warned != tt.warned || n != tt.events {
				t.Errorf("warned %d events %d, want %d and %d", warned, n, tt.warned, tt.events)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzReader feeds arbitrary recordings to the reader: it returns events or an error naming a
// line, and never panics.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"kind":"scrape","ts":"2026-01-01T00:00:00.000000000Z","target":"http://a/metrics","body":"x 1\n"}` + "\n" +
		`{"kind":"step","ts":"2026-01-01T00:00:01.000000000Z","step":1}` + "\n"))
	f.Add([]byte(`{"kind":"scrape","ts":"2026-01-01T00:00:00Z","target":"t","error":"refused"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(strings.NewReader(string(b)))
		for i := 0; i < 10000; i++ {
			e, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if !strings.HasPrefix(err.Error(), "line ") {
					t.Fatalf("error %q does not name the line", err)
				}
				return
			}
			if e.Kind == KindScrape && e.Target == "" {
				t.Fatal("a scrape without target got through")
			}
		}
	})
}
