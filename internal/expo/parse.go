// Package expo reads the Prometheus text exposition format (and the OpenMetrics text format,
// which shares its sample syntax) as a stream.
//
// A vLLM page is 30 to 100 KB and vllmstat needs about a hundred of its samples, at up to
// thousands of pages a second. So the parser does not build metric families: it checks the
// syntax of every line, and hands only the samples whose names the caller asked for to a
// callback, with their labels decoded. Everything else is validated and skipped without
// allocating.
package expo

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Label is one decoded label pair of a sample.
type Label struct {
	Name, Value string
}

// Names is the set of metric names a caller wants, each with an index of the caller's choosing.
// Build it once and share it: it is read-only after NewNames.
type Names struct {
	index map[string]int
	names []string
}

// NewNames returns the set of names; the index of names[i] is i.
func NewNames(names []string) *Names {
	n := &Names{index: make(map[string]int, len(names)), names: names}
	for i, s := range names {
		n.index[s] = i
	}
	return n
}

// Sample is one sample line whose name was asked for. Labels is only valid during the callback
// (the parser reuses its backing array); copy what must outlive it.
type Sample struct {
	ID     int    // index of Name in the Names set
	Name   string // shared with the Names set (no allocation)
	Labels []Label
	Value  float64
	Line   int // 1-based line number in the page
}

// SyntaxError says what was wrong and where: the line, and the column (the line's byte, from 1)
// where the fault starts. It says how many bytes a bad token has, never what they are: a page
// can hold anything, a secret its server never meant to show too, and errors go to the log, the
// API and recordings.
type SyntaxError struct {
	Line int
	Col  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// fault is a syntax error within a line: at is the rest of the line from where it starts.
type fault struct {
	at  []byte
	msg string
}

func (f *fault) Error() string { return f.msg }

func faultAt(at []byte, format string, a ...any) *fault {
	return &fault{at: at, msg: fmt.Sprintf(format, a...)}
}

// Parse reads page and calls emit for every sample whose metric name is in names.
// It returns the first syntax error; samples before it have been emitted. A label value, or a
// HELP or TYPE line, that is not valid UTF-8 is a syntax error, as is a duplicate label name,
// on any line.
func Parse(page []byte, names *Names, emit func(*Sample)) error {
	// A page is valid UTF-8 as a whole nearly always; only when it is not are its label values
	// and HELP and TYPE lines checked one by one, to name the line at fault. (utf8.Valid reads
	// ASCII a word at a time: the page-wide check is lost in the noise of a parse.)
	p := parser{names: names, emit: emit, badUTF8: !utf8.Valid(page)}
	return p.run(page)
}

type parser struct {
	rec    *Shape // records each line when set
	names  *Names
	emit   func(*Sample)
	labels []Label
	s      Sample
	strs   map[string]string // interned label names and values: a page repeats a few dozen
	prev   []Label           // the previous wanted sample's labels: the next one mostly repeats them
	// badUTF8 is set when the page is not valid UTF-8 somewhere.
	badUTF8 bool
}

// reuse returns the string of the label at position i of the previous sample when it equals b
// (consecutive samples share engine and model labels), saving the intern map lookup.
func (p *parser) reuse(i int, b []byte, value bool) (string, bool) {
	if i >= len(p.prev) {
		return "", false
	}
	s := p.prev[i].Name
	if value {
		s = p.prev[i].Value
	}
	return s, s == string(b)
}

// intern returns b as a string, allocating only the first time a page has it.
func (p *parser) intern(b []byte) string {
	if s, ok := p.strs[string(b)]; ok {
		return s
	}
	if p.strs == nil {
		p.strs = make(map[string]string, 64)
	}
	s := string(b)
	p.strs[s] = s
	return s
}

func (p *parser) run(page []byte) error {
	line := 0
	for len(page) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			l, page = page[:i], page[i+1:]
		} else {
			l, page = page, nil
		}
		at, err := p.line(l, line)
		if err != nil {
			return err
		}
		if p.rec != nil {
			p.rec.add(l, at)
		}
	}
	return nil
}

var help, typ = []byte("HELP"), []byte("TYPE")

// keyword reports whether comment c (after its '#') starts with the word kw.
func keyword(c, kw []byte) bool {
	return bytes.HasPrefix(c, kw) && (len(c) == len(kw) || isBlank(c[len(kw)]))
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func trimLeft(b []byte) []byte {
	for len(b) > 0 && isBlank(b[0]) {
		b = b[1:]
	}
	return b
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
}

func isNameChar(c byte) bool { return isNameStart(c) || c >= '0' && c <= '9' }

func isLabelStart(c byte) bool { return isNameStart(c) && c != ':' }

func isLabelChar(c byte) bool { return isLabelStart(c) || c >= '0' && c <= '9' }

// line parses one line. For a sample line it returns where its value starts in l, and -1 for
// comments and blank lines.
func (p *parser) line(l []byte, n int) (int, error) {
	whole := len(l)
	l = trimLeft(l)
	if len(l) == 0 {
		return -1, nil
	}
	// at is the rest of the line from the fault: every slice the line is read by ends where
	// the line ends.
	fail := func(f *fault) (int, error) {
		return 0, &SyntaxError{Line: n, Col: whole - len(f.at) + 1, Msg: f.msg}
	}
	if l[0] == '#' {
		// Comments carry HELP and TYPE, which vllmstat identifies by exact sample names instead;
		// but the format is UTF-8, and a page whose HELP or TYPE line is not is a broken page
		// (Prometheus refuses it too), not one to read numbers from.
		if c := trimLeft(l[1:]); p.badUTF8 && (keyword(c, help) || keyword(c, typ)) && !utf8.Valid(c) {
			kw := "HELP"
			if keyword(c, typ) {
				kw = "TYPE"
			}
			return fail(faultAt(c, "invalid UTF-8 in a %s line", kw))
		}
		return -1, nil
	}
	if !isNameStart(l[0]) {
		return fail(faultAt(l, "not a sample line: a metric name starts with a letter, '_' or ':'"))
	}
	i := 1
	for i < len(l) && isNameChar(l[i]) {
		i++
	}
	name := l[:i]
	if i < len(l) && l[i] >= utf8.RuneSelf {
		return fail(faultAt(l[i:], "a non-ASCII byte after a metric name of %d bytes: names are ASCII letters, digits, '_' and ':'", len(name)))
	}
	rest := trimLeft(l[i:])
	id, want := p.names.index[string(name)]
	p.prev, p.labels = p.labels, p.prev[:0]
	if len(rest) > 0 && rest[0] == '{' {
		var f *fault
		if rest, f = p.labelSet(rest[1:], want); f != nil {
			return fail(f)
		}
		rest = trimLeft(rest)
	}
	end := 0
	for end < len(rest) && !isBlank(rest[end]) {
		end++
	}
	if end == 0 {
		return fail(faultAt(rest, "missing value"))
	}
	v, err := parseValue(rest[:end])
	if err != nil {
		return fail(faultAt(rest, "invalid value of %d bytes", end))
	}
	if f := checkTail(rest[end:]); f != nil {
		return fail(f)
	}
	if p.rec != nil {
		p.rec.want = want
	}
	if want {
		p.s.ID = id
		p.s.Name = p.names.names[id]
		p.s.Labels = p.labels
		p.s.Value = v
		p.s.Line = n
		p.emit(&p.s)
	}
	return whole - len(rest), nil
}

// labelSet parses the inside of {...} and returns what follows the closing brace. Labels are
// decoded only when keep is set.
func (p *parser) labelSet(b []byte, keep bool) ([]byte, *fault) {
	set := b       // the label set from its start, to look for a duplicate name
	var sig uint64 // one bit per label name so far, from its first byte and length
	k := 0         // label names so far
	for {
		b = trimLeft(b)
		if len(b) == 0 {
			return nil, faultAt(b, "unterminated label set")
		}
		if b[0] == '}' {
			return b[1:], nil
		}
		if !isLabelStart(b[0]) {
			return nil, faultAt(b, "not a label name: a label name starts with a letter or '_'")
		}
		i := 1
		for i < len(b) && isLabelChar(b[i]) {
			i++
		}
		lname := b[:i]
		at := b // the label, for a duplicate name
		if i < len(b) && b[i] >= utf8.RuneSelf {
			return nil, faultAt(b[i:], "a non-ASCII byte after a label name of %d bytes: names are ASCII letters, digits and '_'", i)
		}
		b = trimLeft(b[i:])
		if len(b) == 0 || b[0] != '=' {
			return nil, faultAt(b, "expected '=' after a label name")
		}
		b = trimLeft(b[1:])
		if len(b) == 0 || b[0] != '"' {
			return nil, faultAt(b, "expected a quoted label value")
		}
		val, rest, f := p.quoted(b[1:], keep, len(p.labels))
		if f != nil {
			return nil, f
		}
		// Every line is checked, wanted or not: a page with a duplicate label anywhere is broken.
		// Names of one line rarely share a signature bit; only then are they compared.
		bit := uint64(1) << ((uint(lname[0]) + 7*uint(len(lname))) & 63)
		if sig&bit != 0 && hasName(set, k, lname) {
			return nil, faultAt(at, "duplicate label: a label name of %d bytes given twice", len(lname))
		}
		sig |= bit
		k++
		if keep {
			name, ok := p.reuse(len(p.labels), lname, false)
			if !ok {
				name = p.intern(lname)
			}
			p.labels = append(p.labels, Label{Name: name, Value: val})
		}
		b = trimLeft(rest)
		if len(b) > 0 && b[0] == ',' {
			b = b[1:]
			continue
		}
		if len(b) > 0 && b[0] == '}' {
			return b[1:], nil
		}
		return nil, faultAt(b, "expected ',' or '}' after a label value")
	}
}

// hasName reports whether one of the first k label names of set, whose syntax up to there has
// been checked, is name.
func hasName(set []byte, k int, name []byte) bool {
	b := set
	for ; k > 0; k-- {
		b = trimLeft(b)
		i := 0
		for isLabelChar(b[i]) {
			i++
		}
		if bytes.Equal(b[:i], name) {
			return true
		}
		b = trimLeft(b[i:])     // at '='
		b = trimLeft(b[1:])[1:] // past the opening quote
		for j := 0; ; j++ {
			if b[j] == '\\' {
				j++
			} else if b[j] == '"' {
				b = b[j+1:]
				break
			}
		}
		if b = trimLeft(b); b[0] == ',' {
			b = b[1:]
		}
	}
	return false
}

// quoted reads a label value up to its closing quote. It decodes escapes only when keep is set.
// A backslash and the byte after it are read as a pair, so that an escaped quote does not close
// the value; of the pairs, only \\, \" and \n are escapes (see unescape).
func (p *parser) quoted(b []byte, keep bool, pos int) (string, []byte, *fault) {
	// Most values have no escape: then the first quote closes the value. A short value is
	// read byte by byte; a long one (Ray's session names, worker ids) is searched at memchr
	// speed.
	short := min(len(b), 16)
	for i := 0; i < short; i++ {
		if b[i] == '"' {
			return p.closed(b, i, keep, false, pos)
		}
		if b[i] == '\\' {
			short = -1
			break
		}
	}
	if short >= 0 {
		if i := bytes.IndexByte(b[short:], '"'); i >= 0 && bytes.IndexByte(b[short:short+i], '\\') < 0 {
			return p.closed(b, short+i, keep, false, pos)
		}
	}
	escaped := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			if i+1 >= len(b) {
				return "", nil, faultAt(b, "unterminated label value")
			}
			escaped = true
			i++
		case '"':
			return p.closed(b, i, keep, escaped, pos)
		}
	}
	return "", nil, faultAt(b, "unterminated label value")
}

// closed ends a label value at its closing quote b[i].
func (p *parser) closed(b []byte, i int, keep, escaped bool, pos int) (string, []byte, *fault) {
	if p.badUTF8 && !utf8.Valid(b[:i]) {
		return "", nil, faultAt(b, "invalid UTF-8 in a label value of %d bytes", i)
	}
	if !keep {
		return "", b[i+1:], nil
	}
	if !escaped {
		if v, ok := p.reuse(pos, b[:i], true); ok {
			return v, b[i+1:], nil
		}
		return p.intern(b[:i]), b[i+1:], nil
	}
	return unescape(b[:i]), b[i+1:], nil
}

// unescape decodes a label value as Prometheus' scrape parser does: \\, \" and \n are escapes,
// and a backslash before any other byte stays as written, with that byte (OpenMetrics and the
// text format define no other escape, and a page that has one means the backslash).
func unescape(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' {
			i++
			switch b[i] {
			case 'n':
				out = append(out, '\n')
				continue
			case '\\', '"':
			default:
				out = append(out, '\\')
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

// parseValue accepts what the text format allows: Go float syntax without hexadecimal
// mantissas or digit separators, plus Inf and NaN spellings.
func parseValue(b []byte) (float64, error) {
	if v, ok := fastDecimal(b); ok {
		return v, nil
	}
	return slowValue(b)
}

// slowValue is parseValue for every spelling.
func slowValue(b []byte) (float64, error) {
	if bytes.ContainsAny(b, "pPxX_") {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) {
		return math.NaN(), nil
	}
	return v, nil
}

// checkTail accepts an optional integer timestamp, and an OpenMetrics exemplar ("# {...} v").
func checkTail(b []byte) *fault {
	b = trimLeft(b)
	if len(b) == 0 {
		return nil
	}
	if b[0] != '#' {
		end := 0
		for end < len(b) && !isBlank(b[end]) {
			end++
		}
		if _, err := strconv.ParseFloat(string(b[:end]), 64); err != nil || bytes.ContainsAny(b[:end], "pPxX_") {
			return faultAt(b, "invalid timestamp of %d bytes", end)
		}
		b = trimLeft(b[end:])
		if len(b) == 0 {
			return nil
		}
		if b[0] != '#' {
			return faultAt(b, "unexpected text after the timestamp")
		}
	}
	return nil // an exemplar: vllmstat does not read exemplars
}
