package timeline

import (
	"maps"
	"slices"
	"strings"

	"github.com/vllmstat/vllmstat/internal/step"
)

// Label is a short name for a worker: its target without scheme and "/metrics", then
// "#engine" when it has an engine label, then its worker labels, when it has any, as
// "[ReplicaId=r1,WorkerId=w1]" (names sorted, values as they are).
func Label(id step.WorkerID) string {
	s := id.Target
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	s = strings.TrimSuffix(s, "/metrics")
	if id.Engine != "" {
		s += "#" + id.Engine
	}
	if m := id.LabelMap(); len(m) > 0 {
		var b strings.Builder
		b.WriteString(s)
		sep := byte('[')
		for _, name := range slices.Sorted(maps.Keys(m)) {
			b.WriteByte(sep)
			b.WriteString(name + "=" + m[name])
			sep = ','
		}
		b.WriteByte(']')
		s = b.String()
	}
	return s
}

// Labels names every worker in at most width columns. When a name is too long, the part that
// all names share at the start (then at the end) becomes "…", so that what tells the workers
// apart stays; a name still too long loses its middle.
func Labels(ids []step.WorkerID, width int) []string {
	names := make([][]rune, len(ids))
	longest := 0
	for i, id := range ids {
		names[i] = []rune(Label(id))
		longest = max(longest, len(names[i]))
	}
	if longest > width && len(ids) > 1 {
		if n := commonPrefix(names); n > 1 {
			for i := range names {
				names[i] = append([]rune("…"), names[i][n:]...)
			}
		}
	}
	longest = 0
	for _, r := range names {
		longest = max(longest, len(r))
	}
	if longest > width && len(ids) > 1 {
		if n := commonSuffix(names); n > 1 {
			for i, r := range names {
				names[i] = append(r[:len(r)-n:len(r)-n], '…')
			}
		}
	}
	out := make([]string, len(names))
	for i, r := range names {
		if width > 1 && len(r) > width {
			head := (width - 1) / 3
			r = append(append(r[:head:head], '…'), r[len(r)-(width-1-head):]...)
		}
		out[i] = string(r)
	}
	return out
}

// commonPrefix is the length of the start that all names share, cut back to just after a
// separator so that a number is not split.
func commonPrefix(names [][]rune) int {
	n := len(names[0])
	for _, r := range names[1:] {
		n = min(n, len(r))
		for i := range n {
			if r[i] != names[0][i] {
				n = i
				break
			}
		}
	}
	for n > 0 && !separator(names[0][n-1]) {
		n--
	}
	return n
}

// commonSuffix is commonPrefix for the end.
func commonSuffix(names [][]rune) int {
	first := names[0]
	n := len(first)
	for _, r := range names[1:] {
		n = min(n, len(r))
		for i := range n {
			if r[len(r)-1-i] != first[len(first)-1-i] {
				n = i
				break
			}
		}
	}
	for n > 0 && !separator(first[len(first)-n]) {
		n--
	}
	return n
}

func separator(r rune) bool { return strings.ContainsRune(".:/#-_[,=", r) }
