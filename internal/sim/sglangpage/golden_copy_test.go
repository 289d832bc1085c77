package sglangpage

import (
	"strings"
	"testing"
)

// pageFamily is one "# HELP"/"# TYPE" block of a page with its sample lines minus the values.
type pageFamily struct {
	name, typ, help string
	samples         []string
}

func parseStructure(t *testing.T, page string) []pageFamily {
	t.Helper()
	var fams []pageFamily
	for _, line := range strings.Split(strings.TrimSuffix(page, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(line[len("# HELP "):], " ")
			fams = append(fams, pageFamily{name: name, help: help})
		case strings.HasPrefix(line, "# TYPE "):
			name, typ, _ := strings.Cut(line[len("# TYPE "):], " ")
			if len(fams) == 0 || fams[len(fams)-1].name != name {
				t.Fatalf("TYPE line without HELP: %q", line)
			}
			fams[len(fams)-1].typ = typ
		default:
			if len(fams) == 0 {
				t.Fatalf("sample before any HELP: %q", line)
			}
			f := &fams[len(fams)-1]
			f.samples = append(f.samples, line[:strings.LastIndexByte(line, ' ')])
		}
	}
	return fams
}
