package routerpage

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// The router's merged page, as sgl-model-gateway builds it (core/metrics_aggregator.rs,
// aggregate_metrics): every server's page has each ':' replaced by '_' over its whole text
// (names, HELP texts, label values), is parsed by the openmetrics-parser crate (0.4.4, its
// Prometheus text parser), gets worker_addr on every family, and the families of one name are
// merged; the result is the crate's Display of the exposition. What that gives, and what this
// file reproduces:
//   - a family's label names sorted (the parser sorts them; worker_addr is inserted in order),
//     le last on a bucket;
//   - a histogram's series as its buckets, then _sum, then _count, the count an integer;
//   - numbers kept as i64 when their text reads as one, else as f64 printed by Rust's Display:
//     "2.0" gives "2", "1e+06" gives "1000000", le="1.0" gives le="1", infinities "+Inf" and
//     "-Inf";
//   - a blank line between families, in the order of the crate's HashMap of families, which
//     its random hashing makes another at every answer (here: shuffled by a seed, or in name
//     order for seed 0);
//   - a page the parser rejects is left out whole (a metric name with an upper-case letter, a
//     family whose samples differ in label names, a histogram without +Inf, ...);
//   - a family whose label names differ between two servers (a DP server's dp_rank beside a
//     server without) fails the whole answer: merge_family's ensure!, returned as an error.
//
// Not reproduced, as no simulated page has them: timestamps, exemplars and summaries, which
// make a page be left out here.

// metricPack is one server's page and its address.
type MetricPack struct {
	Addr string
	Page []byte
}

// mergeEnginePages merges the servers' pages as the router does (see above), in the servers'
// order, its families shuffled by seed (in name order for 0); an error is the router's
// aggregation error, which fails the whole page.
func MergeEnginePages(packs []MetricPack, seed uint64) ([]byte, error) {
	merged := map[string]*rFamily{}
	for _, p := range packs {
		fams, err := parseRouterPage(strings.ReplaceAll(string(p.Page), ":", "_"))
		if err != nil {
			continue // the router logs the page and leaves it out
		}
		for _, name := range slices.Sorted(maps.Keys(fams)) {
			b := fams[name]
			b.withLabel("worker_addr", p.Addr)
			a := merged[name]
			if a == nil {
				merged[name] = b
				continue
			}
			if !slices.Equal(a.labels, b.labels) {
				return nil, aggregateError(fmt.Sprintf("Label names should agree a=%s b=%s", rustDebug(a.labels), rustDebug(b.labels)))
			}
			for _, s := range b.samples {
				if a.find(s.values) != nil {
					return nil, aggregateError(fmt.Sprintf("failed to merge samples: InvalidMetric(%q)", "Cannot add a duplicate metric to a MetricFamily"))
				}
				a.samples = append(a.samples, s)
			}
		}
	}
	names := slices.Sorted(maps.Keys(merged))
	if seed != 0 {
		r := rand.New(rand.NewPCG(seed, 0))
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	}
	var b []byte
	for i, name := range names {
		if i > 0 {
			b = append(b, '\n')
		}
		b = merged[name].appendTo(b)
	}
	return b, nil
}

// aggregateError is the router's aggregation error, in its words (anyhow's Display), which the
// router answers after "Failed to aggregate metrics: ".
type aggregateError string

func (e aggregateError) Error() string { return string(e) }

// rustDebug writes names as Rust's Debug writes a slice of Strings.
func rustDebug(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// rNumber is a sample's number as the crate keeps it: an i64 when its text reads as one, else
// an f64.
type rNumber struct {
	isInt bool
	i     int64
	f     float64
}

func (n rNumber) float() float64 {
	if n.isInt {
		return float64(n.i)
	}
	return n.f
}

// asInt is the crate's MetricNumber::as_i64: a float counts when it is a whole number.
func (n rNumber) asInt() (int64, bool) {
	if n.isInt {
		return n.i, true
	}
	if math.Abs(math.Round(n.f)-n.f) < 0x1p-52 {
		return int64(n.f), true
	}
	return 0, false
}

func (n rNumber) String() string {
	if n.isInt {
		return strconv.FormatInt(n.i, 10)
	}
	return rustFloat(n.f)
}

// rustFloat formats v as the crate's format_float: Rust's Display (the shortest decimal that
// reads back as v, never an exponent), "+Inf", "-Inf" and "NaN" for the others.
func rustFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// parseNumber reads a sample's value as the grammar's number rule and the crate's parse do.
func parseNumber(s string) (rNumber, bool) {
	if !numberText(s) {
		return rNumber{}, false
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return rNumber{isInt: true, i: i}, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return rNumber{}, false
	}
	return rNumber{f: f}, true
}

// numberText is the grammar's number: a decimal with an optional sign, fraction and exponent,
// a signed inf or infinity, or nan, the words in any case.
func numberText(s string) bool {
	switch l := strings.ToLower(s); l {
	case "+inf", "-inf", "+infinity", "-infinity", "nan":
		return true
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if digits() == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// rFamily is one family of a parsed page.
type rFamily struct {
	name, help, typ string // typ "" is the crate's Unknown, which Display writes no TYPE for
	descriptors     int
	labels          []string // sorted; le is a bucket's own
	labelsSet       bool
	samples         []*rSample
}

// rSample is one series of a family: a gauge's or counter's value, or a histogram's parts.
type rSample struct {
	values  []string // in the order of the family's labels, as the page wrote them
	value   *rNumber
	buckets []rBucket
	sum     *rNumber
	count   *uint64
}

type rBucket struct {
	le    float64
	count rNumber
}

func (f *rFamily) find(values []string) *rSample {
	for _, s := range f.samples {
		if slices.Equal(s.values, values) {
			return s
		}
	}
	return nil
}

// withLabel is the crate's MetricFamily::with_labels of one label: its value on every sample,
// the name inserted in order.
func (f *rFamily) withLabel(name, value string) {
	i, found := slices.BinarySearch(f.labels, name)
	if found {
		for _, s := range f.samples {
			s.values[i] = value
		}
		return
	}
	f.labels = slices.Insert(f.labels, i, name)
	for _, s := range f.samples {
		s.values = slices.Insert(s.values, i, value)
	}
}

// appendTo writes the family as the crate's Display does.
func (f *rFamily) appendTo(b []byte) []byte {
	if f.help != "" {
		b = append(b, "# HELP "+f.name+" "+f.help+"\n"...)
	}
	if f.typ != "" {
		b = append(b, "# TYPE "+f.name+" "+f.typ+"\n"...)
	}
	for _, s := range f.samples {
		labels := renderLabels(f.labels, s.values, "")
		if f.typ != "histogram" {
			b = append(b, f.name+labels+" "+s.value.String()+"\n"...)
			continue
		}
		for _, bk := range s.buckets {
			b = append(b, f.name+"_bucket"+renderLabels(f.labels, s.values, rustFloat(bk.le))+" "+bk.count.String()+"\n"...)
		}
		if s.sum != nil {
			b = append(b, f.name+"_sum"+labels+" "+s.sum.String()+"\n"...)
		}
		if s.count != nil {
			b = append(b, f.name+"_count"+labels+" "+strconv.FormatUint(*s.count, 10)+"\n"...)
		}
	}
	return b
}

// renderLabels is the crate's render_label_values: the values as the page wrote them, le last.
func renderLabels(names, values []string, le string) string {
	if le != "" {
		names = append(slices.Clip(names), "le")
		values = append(slices.Clip(values), le)
	}
	if len(names) == 0 {
		return ""
	}
	kv := make([]string, len(names))
	for i, n := range names {
		kv[i] = n + `="` + values[i] + `"`
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// parseRouterPage parses a page as the crate's parse_prometheus does (after the router's
// replacement of ':'), or says why it would not.
func parseRouterPage(text string) (map[string]*rFamily, error) {
	if text == "" {
		return nil, errors.New("no family")
	}
	if !strings.HasSuffix(text, "\n") {
		return nil, errors.New("no newline at the end")
	}
	fams := map[string]*rFamily{}
	var cur *rFamily
	end := func() error {
		if cur == nil {
			return nil
		}
		if err := cur.Validate(); err != nil {
			return err
		}
		if fams[cur.name] != nil {
			return fmt.Errorf("family %s after that family was finalised", cur.name)
		}
		fams[cur.name] = cur
		cur = nil
		return nil
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case line == "":
			if err := end(); err != nil { // a blank line ends a family
				return nil, err
			}
		case strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE "):
			if cur == nil || len(cur.samples) > 0 || cur.labelsSet || cur.descriptors == 2 {
				if err := end(); err != nil {
					return nil, err
				}
				cur = &rFamily{}
			}
			if err := cur.descriptor(line); err != nil {
				return nil, err
			}
		case strings.HasPrefix(line, "# ") && len(line) > 2:
			// a comment
		default:
			if cur == nil {
				cur = &rFamily{}
			}
			if err := cur.sample(line); err != nil {
				return nil, err
			}
		}
	}
	if err := end(); err != nil {
		return nil, err
	}
	if len(fams) == 0 {
		return nil, errors.New("no family")
	}
	return fams, nil
}

// metricName is the grammar's metricname in openmetrics-parser 0.4.4: a lower-case letter, then
// lower-case letters, digits and '_'.
func metricName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func (f *rFamily) setName(name string) error {
	if f.name != "" && f.name != name {
		return fmt.Errorf("family %s has a metric %s", f.name, name)
	}
	f.name = name
	return nil
}

// descriptor reads a HELP or TYPE line into the family.
func (f *rFamily) descriptor(line string) error {
	kw := line[2:6]
	name, rest, ok := strings.Cut(line[7:], " ")
	if !ok || !metricName(name) {
		return fmt.Errorf("bad %s line %q", kw, line)
	}
	if err := f.setName(name); err != nil {
		return err
	}
	f.descriptors++
	if kw == "HELP" {
		if f.help != "" || !escapedString(rest) {
			return fmt.Errorf("bad HELP line %q", line)
		}
		f.help = rest
		return nil
	}
	switch rest {
	case "counter", "gauge", "histogram":
	default: // summaries are not simulated; untyped is no type of the grammar
		return fmt.Errorf("type %q", rest)
	}
	if f.typ != "" {
		return errors.New("two TYPE lines")
	}
	f.typ = rest
	return nil
}

// escapedString is the grammar's escapedstring: no '"' or newline but escaped, and '\' only
// before '\', 'n' or '"'.
func escapedString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"', '\n', '\r':
			return false
		case '\\':
			if i+1 == len(s) || !strings.ContainsRune(`\n"`, rune(s[i+1])) {
				return false
			}
			i++
		}
	}
	return true
}

// sample reads a sample line into the family as process_new_metric does.
func (f *rFamily) sample(line string) error {
	i := 0
	for i < len(line) && line[i] != '{' && line[i] != ' ' {
		i++
	}
	name := line[:i]
	if !metricName(name) {
		return fmt.Errorf("bad metric name %q", name)
	}
	var names, values []string
	if i < len(line) && line[i] == '{' {
		var err error
		names, values, i, err = parseLabels(line, i+1)
		if err != nil {
			return err
		}
	}
	j := i
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i == j {
		return fmt.Errorf("no value in %q", line)
	}
	if strings.ContainsRune(line[i:], ' ') {
		return fmt.Errorf("timestamp or exemplar in %q", line) // not simulated
	}
	v, ok := parseNumber(line[i:])
	if !ok {
		return fmt.Errorf("bad value in %q", line)
	}
	suffix, mandatory := "", ""
	switch f.typ {
	case "histogram":
		for _, s := range []struct{ suffix, label string }{{"_bucket", "le"}, {"_count", ""}, {"_sum", ""}, {"", ""}} {
			if strings.HasSuffix(name, s.suffix) {
				suffix, mandatory = s.suffix, s.label
				break
			}
		}
	}
	var le string
	if mandatory != "" {
		k := slices.Index(names, mandatory)
		if k < 0 {
			return fmt.Errorf("%s lacks %s", name, mandatory)
		}
		le = values[k]
		names = slices.Delete(slices.Clone(names), k, k+1)
		values = slices.Delete(slices.Clone(values), k, k+1)
	}
	if !f.labelsSet {
		f.labels, f.labelsSet = names, true
	} else {
		for _, n := range f.labels {
			if !slices.Contains(names, n) {
				return errors.New("labels in metrics have different label sets")
			}
		}
	}
	base := name
	for suffix != "" && strings.HasSuffix(base, suffix) {
		base = strings.TrimSuffix(base, suffix)
	}
	if err := f.setName(base); err != nil {
		return err
	}
	s := f.find(values)
	if s == nil {
		s = &rSample{values: values}
		f.samples = append(f.samples, s)
	}
	switch {
	case f.typ != "histogram":
		if s.value != nil {
			return errors.New("duplicate metric")
		}
		if f.typ == "counter" && (v.float() < 0 || math.IsNaN(v.float())) {
			return fmt.Errorf("counter totals must be non negative (got: %v)", v.float())
		}
		s.value = &v
	case suffix == "_bucket":
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("invalid histogram bound: %s", le)
		}
		s.buckets = append(s.buckets, rBucket{le: bound, count: v})
	case suffix == "_sum":
		if s.sum != nil {
			return errors.New("duplicate metric")
		}
		s.sum = &v
	default: // _count, or the family's bare name
		c, ok := v.asInt()
		if !ok || c < 0 {
			return fmt.Errorf("histogram counts must be positive integers (got: %v)", v.float())
		}
		if s.count != nil {
			return errors.New("duplicate metric")
		}
		u := uint64(c)
		s.count = &u
	}
	return nil
}

// parseLabels reads the labels after a sample's '{' from line[i:], sorted by name as the
// crate's parse_labels sorts them; it returns where the labels end.
func parseLabels(line string, i int) (names, values []string, next int, err error) {
	type kv struct{ n, v string }
	var ls []kv
	for {
		if i < len(line) && line[i] == '}' {
			i++
			break
		}
		j := i
		for i < len(line) && (line[i] == '_' || 'a' <= line[i] && line[i] <= 'z' || 'A' <= line[i] && line[i] <= 'Z' || i > j && '0' <= line[i] && line[i] <= '9') {
			i++
		}
		n := line[j:i]
		if n == "" || !strings.HasPrefix(line[i:], `="`) {
			return nil, nil, 0, fmt.Errorf("bad labels in %q", line)
		}
		i += 2
		j = i
		for i < len(line) && line[i] != '"' {
			if line[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(line) || !escapedString(line[j:i]) {
			return nil, nil, 0, fmt.Errorf("bad label value in %q", line)
		}
		if slices.ContainsFunc(ls, func(l kv) bool { return l.n == n }) {
			return nil, nil, 0, fmt.Errorf("label %s twice", n)
		}
		ls = append(ls, kv{n, line[j:i]})
		i++
		if i < len(line) && line[i] == ',' {
			i++
		} else if i >= len(line) || line[i] != '}' {
			return nil, nil, 0, fmt.Errorf("bad labels in %q", line)
		}
	}
	slices.SortStableFunc(ls, func(a, b kv) int { return strings.Compare(a.n, b.n) })
	for _, l := range ls {
		names = append(names, l.n)
		values = append(values, l.v)
	}
	return names, values, i, nil
}

// validate is the crate's checks of a family once read.
func (f *rFamily) Validate() error {
	if f.typ == "counter" && !strings.HasSuffix(f.name, "_total") {
		return fmt.Errorf("counters should have a _total suffix. Got %s", f.name)
	}
	for _, s := range f.samples {
		if len(s.values) != len(f.labels) {
			return errors.New("metrics in family have different label sets")
		}
		if f.typ != "histogram" {
			continue
		}
		if len(s.buckets) == 0 || !slices.ContainsFunc(s.buckets, func(b rBucket) bool { return math.IsInf(b.le, 1) }) {
			return errors.New("histograms must have a +Inf bucket")
		}
		negative := slices.ContainsFunc(s.buckets, func(b rBucket) bool { return b.le < 0 })
		if negative && s.sum != nil || !negative && s.sum != nil && s.sum.float() < 0 {
			return errors.New("a histogram's sum is negative or beside a negative bucket")
		}
		if (s.sum == nil) != (s.count == nil) {
			return errors.New("a histogram has _sum or _count without the other")
		}
		last := math.Inf(-1)
		for _, b := range s.buckets {
			if b.count.float() < last {
				return errors.New("histograms must be cumulative")
			}
			last = b.count.float()
		}
	}
	return nil
}
