package page

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vllmstat/vllmstat/internal/expo"
	"github.com/vllmstat/vllmstat/internal/vllm"
)

// raw is a sample kept during the first pass over a page, before spellings are chosen.
type raw struct {
	meta   int32
	worker int32 // index in the page's workerTable
	key    string
	reason string
	le     float64
	value  float64
}

// stop carries a limit error out of expo.Parse's callback, which has no other way to end the
// parse: a page over its limits is abandoned at the first sample too many, before the rest of it
// is decoded and interned.
type stop struct{ err error }

// collect reads the samples of the families vllmstat reads from body, and which spelling of
// each family is the page's. With sh set, the page's lines are remembered there too.
func collect(body []byte, opt Options, sh *expo.Shape) (raws []raw, _ [3][]int, workers []workerKey, err error) {
	rd := newRawReader(opt, len(body))
	err = rd.run(func() error {
		if sh != nil {
			return sh.Parse(body, tableSet, rd.sample)
		}
		return expo.Parse(body, tableSet, rd.sample)
	})
	if err != nil {
		return nil, rd.best, nil, err
	}
	return rd.raws, rd.best, rd.wt.keys, nil
}

// rawReader is one pass over a page's samples: it turns each sample expo emits into a raw,
// numbers the raw's worker, and notes the best spelling of each family, within the page's
// limits.
type rawReader struct {
	lim  Limits
	wl   []string
	raws []raw
	best [3][]int // lowest rank seen per kind, and engine and family (see meta.slot)
	bad  error
	kv   []string
	wkv  []string
	rkv  []string
	buf  []byte
	keys map[string]string // series keys repeat across a page's families: build each once
	wt   workerTable       // the page's workers, copies and tokenizers apart (see workerKey)
	// The workers the page reports (workerKey without ranks) of engine kinds with ranks, as
	// counted against lim.MaxWorkers (see count); counted and tokenizers number them.
	reported   map[workerKey]bool // true: counted; false: a tokenizer so far
	counted    int
	tokenizers int
	// Consecutive samples mostly belong to one worker; its engine and labels are interned
	// strings, so comparing them with the last sample's is cheap.
	last    workerKey
	lastIdx int32
}

func newRawReader(opt Options, size int) *rawReader {
	rd := &rawReader{lim: opt.Limits, wl: opt.WorkerLabels, keys: map[string]string{}, lastIdx: -1}
	if rd.wl == nil {
		rd.wl = defaultWorkerLabels
	}
	// About a third of a vLLM page's lines are kept; a huge page grows the slice as it goes, so
	// that refusing one at a limit costs no more than the limit.
	rd.raws = make([]raw, 0, min(size/256, 4096))
	for k, n := range numFams {
		rd.best[k] = fill(int(vllm.NumEngines) * n)
	}
	return rd
}

// run runs parse, whose callbacks may stop it at a limit, and returns its error, a limit's, or
// the first bad le.
func (rd *rawReader) run(parse func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(stop)
			if !ok {
				panic(r)
			}
			err = s.err
		}
	}()
	if err = parse(); err == nil {
		err = rd.bad
	}
	return err
}

func (rd *rawReader) intern(b []byte) string {
	k, ok := rd.keys[string(b)]
	if !ok {
		k = string(b)
		rd.keys[k] = k
	}
	return k
}

// room stops the parse when the page has as many series as its limit allows already.
func (rd *rawReader) room(line int) {
	if rd.lim.MaxSeries > 0 && len(rd.raws) >= rd.lim.MaxSeries {
		panic(stop{fmt.Errorf("%w: line %d: more than the limit of %d series (samples of the families vllmstat reads) per target", ErrLimit, line, rd.lim.MaxSeries)})
	}
}

// worker returns the number of worker wk, numbering it if it is new, within the limit.
func (rd *rawReader) worker(wk workerKey, line int) int32 {
	i := rd.wt.find(wk)
	if i < 0 {
		rd.count(wk, line)
		i = rd.wt.add(wk)
	}
	return i
}

// count counts a page worker new to the page against lim.MaxWorkers, and stops the parse when
// it makes one worker too many. The limit counts the workers the page reports: not the copies
// of one worker's figures that its ranks export, nor SGLang's tokenizers (a worker of an engine
// kind with ranks whose samples carry none), which every server has beside its schedulers' DP
// ranks; those are bounded by the same number on their own.
func (rd *rawReader) count(wk workerKey, line int) {
	if rd.lim.MaxWorkers <= 0 {
		return
	}
	if len(vllm.Engines[wk.kind].RankLabels) == 0 {
		rd.counted++ // a worker of its own: no copies, no tokenizer
	} else {
		if rd.reported == nil {
			rd.reported = map[workerKey]bool{}
		}
		rk := workerKey{engine: wk.engine, labels: wk.labels, kind: wk.kind}
		counted, seen := rd.reported[rk]
		switch {
		case seen && (counted || !wk.rank.ranked):
			return // another copy, or the tokenizer of a worker already counted
		case !wk.rank.ranked:
			rd.reported[rk] = false
			if rd.tokenizers++; rd.tokenizers > rd.lim.MaxWorkers {
				panic(stop{fmt.Errorf("%w: line %d: %s is one more than the limit of %d SGLang tokenizers (workers without ranks) per target%s",
					ErrLimit, line, rk, rd.lim.MaxWorkers, rd.madeBy(rk))})
			}
			return
		case seen: // a tokenizer's worker, which its ranks make one of the counted
			rd.tokenizers--
		}
		rd.reported[rk] = true
		rd.counted++
		wk = rk
	}
	if rd.counted > rd.lim.MaxWorkers {
		note := ""
		if rd.reported != nil {
			note = " (SGLang's tokenizers and the copies its ranks export are not counted)"
		}
		panic(stop{fmt.Errorf("%w: line %d: %s is one more than the limit of %d workers (engines) per target%s%s",
			ErrLimit, line, wk, rd.lim.MaxWorkers, rd.madeBy(wk), note)})
	}
}

// madeBy says which labels tell the page's workers apart, for a limit's error: the engine label
// and the worker labels of the workers so far and of wk.
func (rd *rawReader) madeBy(wk workerKey) string {
	names := workerLabelNames(append(slices.Clip(rd.wt.keys), wk))
	if len(names) == 0 {
		return ""
	}
	return "; its workers are told apart by " + strings.Join(names, ", ")
}

// keep adds a raw whose worker is numbered.
func (rd *rawReader) keep(r raw) {
	if m := &table.metas[r.meta]; m.role != rCreated && m.rank < rd.best[m.kind][m.slot()] {
		rd.best[m.kind][m.slot()] = m.rank
	}
	rd.raws = append(rd.raws, r)
}

// sample decodes one sample expo emits.
func (rd *rawReader) sample(s *expo.Sample) {
	rd.room(s.Line)
	m := table.metas[s.ID]
	r := raw{meta: int32(s.ID), value: s.Value}
	wk := workerKey{kind: m.eng}
	es := &vllm.Engines[m.eng]
	rd.kv = rd.kv[:0]
	var with string // the value of the family's second split label
	for _, l := range s.Labels {
		switch l.Name {
		case "engine":
			wk.engine = l.Value
			continue
		case "le":
			if m.role == rBucket {
				le, err := strconv.ParseFloat(l.Value, 64)
				if err != nil && rd.bad == nil {
					rd.bad = fmt.Errorf("line %d: %s: invalid le label value of %d bytes", s.Line, s.Name, len(l.Value))
				}
				r.le = le
				continue
			}
		default:
			if m.split != "" && l.Name == m.split {
				r.reason = l.Value // and it stays in the key
				break
			}
			if m.splitWith != "" && l.Name == m.splitWith {
				with = l.Value
				break
			}
			if slices.Contains(rd.wl, l.Name) || slices.Contains(es.WorkerLabels, l.Name) {
				rd.wkv = append(rd.wkv, l.Name, l.Value)
				continue
			}
			if i := slices.Index(es.RankLabels, l.Name); i >= 0 {
				wk.rank.set(i, l.Value)
				rd.rkv = append(rd.rkv, l.Name, l.Value)
				continue
			}
		}
		rd.kv = append(rd.kv, l.Name, l.Value)
	}
	if len(rd.wkv) > 0 {
		sortPairs(rd.wkv)
		rd.buf = appendKey(rd.buf[:0], rd.wkv)
		if wk.labels = rd.last.labels; string(rd.buf) != wk.labels {
			wk.labels = rd.intern(rd.buf)
		}
		rd.wkv = rd.wkv[:0]
	}
	if len(rd.rkv) > 0 {
		sortPairs(rd.rkv)
		rd.buf = appendKey(rd.buf[:0], rd.rkv)
		if wk.rank.id = rd.last.rank.id; string(rd.buf) != wk.rank.id {
			wk.rank.id = rd.intern(rd.buf)
		}
		rd.rkv = rd.rkv[:0]
	}
	if rd.lastIdx < 0 || wk != rd.last {
		rd.last, rd.lastIdx = wk, rd.worker(wk, s.Line)
	}
	r.worker = rd.lastIdx
	if m.splitWith != "" {
		// Labels come in any order: the pair is joined once both are read.
		rd.buf = append(append(append(rd.buf[:0], r.reason...), ':'), with...)
		r.reason = rd.intern(rd.buf)
	}
	if m.role == rBucket && !hasLabel(s.Labels, "le") && rd.bad == nil {
		rd.bad = fmt.Errorf("line %d: %s: bucket without le label", s.Line, s.Name)
	}
	sortPairs(rd.kv)
	rd.buf = appendKey(rd.buf[:0], rd.kv)
	r.key = rd.intern(rd.buf)
	rd.keep(r)
}

// appendKey appends the series key of sorted name, value pairs: name="value" pairs joined by
// commas, each value quoted with its backslashes, quotes and newlines escaped as in the
// exposition format, so that two different label sets never share a key (a value may hold
// commas, equals signs and quotes).
func appendKey(buf []byte, kv []string) []byte {
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, kv[i]...)
		buf = append(buf, '=', '"')
		v := kv[i+1]
		if strings.ContainsAny(v, "\\\"\n") {
			for j := 0; j < len(v); j++ {
				switch v[j] {
				case '\\', '"':
					buf = append(buf, '\\', v[j])
				case '\n':
					buf = append(buf, '\\', 'n')
				default:
					buf = append(buf, v[j])
				}
			}
		} else {
			buf = append(buf, v...)
		}
		buf = append(buf, '"')
	}
	return buf
}

func hasLabel(ls []expo.Label, name string) bool {
	for _, l := range ls {
		if l.Name == name {
			return true
		}
	}
	return false
}

func fill(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = math.MaxInt
	}
	return s
}

// sortPairs sorts name, value pairs by name; pages list labels sorted already, so this is
// usually one pass.
func sortPairs(kv []string) {
	for i := 2; i < len(kv); i += 2 {
		for j := i; j >= 2 && kv[j] < kv[j-2]; j -= 2 {
			kv[j], kv[j-2] = kv[j-2], kv[j]
			kv[j+1], kv[j-1] = kv[j-1], kv[j+1]
		}
	}
}
