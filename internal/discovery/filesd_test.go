package discovery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFile(t *testing.T) {
	tests := []struct {
		name, file, in string
		want           string // URL{labels} ...
		errHas         string
	}{
		{name: "json", file: "a.json",
			in:   `[{"targets": ["10.0.0.1:8000", "https://h:9/x"], "labels": {"team": "a", "__meta_x": "y", "empty": ""}}, {"targets": ["10.0.0.2:8000"]}]`,
			want: "http://10.0.0.1:8000/metrics{team=a} https://h:9/x{team=a} http://10.0.0.2:8000/metrics{}"},
		{name: "yaml", file: "a.YML", in: "- targets: [\"h:1\"]\n  labels: {__scheme__: https, __metrics_path__: /m, zone: z}\n",
			want: "https://h:1/m{zone=z}"},
		{name: "duplicate keeps the first group's labels", file: "a.yaml", in: "- {targets: [\"h:1\"], labels: {g: \"1\"}}\n- {targets: [\"http://h:1/metrics\"], labels: {g: \"2\"}}\n",
			want: "http://h:1/metrics{g=1}"},
		{name: "no targets", file: "a.json", in: "[]", want: ""},
		{name: "empty file", file: "a.yaml", in: "  \n", errHas: "file is empty"},
		{name: "bad json", file: "a.json", in: `[{"targets": ["h:1"]`, errHas: "not a JSON list"},
		{name: "unknown key", file: "a.json", in: `[{"targets": ["h:1"], "lables": {}}]`, errHas: `unknown field "lables"`},
		{name: "unknown yaml key", file: "a.yaml", in: "- targets: [\"h:1\"]\n  lables: {}\n", errHas: "lables"},
		{name: "trailing json", file: "a.json", in: `[] []`, errHas: "more after the list"},
		{name: "extension", file: "a.txt", in: `[]`, errHas: `extension ".txt"`},
		{name: "bad label name", file: "a.json", in: `[{"targets": ["h:1"], "labels": {"1x": "a"}}]`, errHas: `group 0: label "1x"`},
		{name: "bad scheme", file: "a.json", in: `[{"targets": ["h:1"], "labels": {"__scheme__": "ftp"}}]`, errHas: "not http or https"},
		{name: "bad target", file: "a.json", in: `[{"targets": ["h:1"]}, {"targets": ["ok:1", "u:s3cret@nohost"]}]`, errHas: `group 1: targets[1]: "<secret>@nohost"`},
		{name: "host without port", file: "a.json", in: `[{"targets": ["h"]}]`, want: "http://h/metrics{}"},
		{name: "path in host:port", file: "a.json", in: `[{"targets": ["h:1/x"]}]`, errHas: "want host:port or a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := ParseFile(tt.file, []byte(tt.in))
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("err %v, want one with %q and no secret", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tg := range ts {
				var ls []string
				for k, v := range tg.Labels {
					ls = append(ls, k+"="+v)
				}
				got = append(got, tg.URL+"{"+strings.Join(ls, ",")+"}")
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Fatalf("got  %s\nwant %s", g, tt.want)
			}
		})
	}
}

// writeFile replaces path's content at once, as a careful writer does (rename), so that a
// refresh never sees half a file.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFileSetRefresh follows a glob of file_sd files through a run: a file's targets and
// labels, a rewrite of the same size, a broken file keeping its last good targets (logged once
// for the episode, its recovery once), a new file matching the glob, a file removed, and a
// pattern matching nothing, said once.
func TestFileSetRefresh(t *testing.T) {
	dir := t.TempDir()
	log, lb := newLog()
	set := newFileSet([]string{filepath.Join(dir, "*.json"), filepath.Join(dir, "missing.yaml")}, log)
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	refresh := func() map[string]string {
		out := map[string]string{}
		for _, u := range set.refresh(context.Background()) {
			var s []string
			for _, tg := range u.targets {
				s = append(s, tg.URL+"{team="+tg.Labels["team"]+"}")
			}
			out[strings.TrimPrefix(u.source, "file:"+dir+"/")] = strings.Join(s, " ")
		}
		return out
	}
	check := func(what string, got map[string]string, want map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: updates %v, want %v", what, got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("%s: updates %v, want %v", what, got, want)
			}
		}
	}
	check("no files", refresh(), nil)
	writeFile(t, a, `[{"targets": ["h:1"], "labels": {"team": "x"}}]`)
	check("a appears", refresh(), map[string]string{"a.json": "http://h:1/metrics{team=x}"})
	check("unchanged", refresh(), nil)
	writeFile(t, a, `[{"targets": ["h:1"], "labels": {"team": "y"}}]`) // same size
	check("a's labels change", refresh(), map[string]string{"a.json": "http://h:1/metrics{team=y}"})
	writeFile(t, a, `[{"targets": ["h:1"]`)
	check("a broken", refresh(), nil)
	writeFile(t, a, `[{"targets": ["h:2"]`)
	check("a broken otherwise", refresh(), nil)
	if n := lb.Count("file_sd file is broken"); n != 1 || !strings.Contains(lb.String(), "path="+a) || !strings.Contains(lb.String(), "targets=1") {
		t.Fatalf("broken file logged %d times, want once with its path and the targets kept:\n%s", n, lb)
	}
	writeFile(t, b, `[{"targets": ["h:3", "h:4"]}]`)
	check("b appears while a is broken", refresh(), map[string]string{"b.json": "http://h:3/metrics{team=} http://h:4/metrics{team=}"})
	writeFile(t, a, `[{"targets": ["h:1"], "labels": {"team": "y"}}]`)
	check("a fixed with its last good content", refresh(), nil)
	if lb.Count("file_sd file recovered") != 1 {
		t.Fatalf("recovery not logged once:\n%s", lb)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	check("b removed", refresh(), map[string]string{"b.json": ""})
	writeFile(t, a, `[]`)
	check("a emptied", refresh(), map[string]string{"a.json": ""})
	if n := lb.Count("file_sd pattern matches no file"); n != 2 { // *.json at first, missing.yaml throughout
		t.Fatalf("patterns without files logged %d times, want 2:\n%s", n, lb)
	}
}
