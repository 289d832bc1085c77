package cli

import (
	"flag"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
)

// undefinedFlag is how the flag package begins the error of a flag a command does not have.
const undefinedFlag = "flag provided but not defined: -"

// nearFlag returns the flag of fs nearest to the one err says fs does not have, spelled as
// the usage texts spell it ("--out", "-o"), or "" when none is near.
func nearFlag(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), undefinedFlag)
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	n := nearestName(name, names)
	switch {
	case n == "":
		return ""
	case len(n) == 1:
		return "-" + n
	}
	return "--" + n
}

// nearestName returns the name of names nearest to name: one a typo away (see yamlx.Suggest),
// else the longest that name begins with or that begins with name, in words of three letters
// or more ("out-dir" and "output" for "out", "step" for "step-every"), else a one-letter name
// that is name's first letter ("out" for "o"); "" when none is near.
func nearestName(name string, names []string) string {
	if s := yamlx.Suggest(name, names); s != "" {
		return s
	}
	names = slices.Sorted(slices.Values(names))
	best := ""
	for _, n := range names {
		shorter, longer := n, name
		if len(name) < len(n) {
			shorter, longer = name, n
		}
		if len(shorter) >= 3 && strings.HasPrefix(longer, shorter) && len(n) > len(best) {
			best = n
		}
	}
	if best != "" {
		return best
	}
	for _, n := range names {
		if len(n) == 1 && name != "" && name[:1] == n {
			return n
		}
	}
	return ""
}
