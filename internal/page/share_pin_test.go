package page

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// TestTemplateKeepsCopyName: two SGLang servers whose pages have the same lines but for the
// ranks of the copy their worker is read from (one exports TP rank 0, the other TP rank 1 only)
// are of two structures: a Parser of each fills its pages from a template of its own, so that a
// page read by the previous page's lines names its own copy, as ParsePage does, never the other
// server's.
func TestTemplateKeepsCopyName(t *testing.T) {
	body := func(tp string, running int) []byte {
		return fmt.Appendf(nil, `sglang:num_running_reqs{model_name="m",pp_rank="0",tp_rank=%q} %d
sglang:num_retracted_requests_total{model_name="m",pp_rank="0",tp_rank=%q} 7
`, tp, running, tp)
	}
	a, b := NewParser(Options{}), NewParser(Options{})
	for k := range 3 {
		for _, s := range []struct {
			p  *Parser
			tp string
		}{{a, "0"}, {b, "1"}} {
			want, err := ParsePage(body(s.tp, k))
			if err != nil || len(want.Engines) != 1 {
				t.Fatalf("ParsePage: %v, %+v", err, want)
			}
			if c := want.Engines[0].Copy; c != fmt.Sprintf(`pp_rank="0",tp_rank=%q`, s.tp) {
				t.Fatalf("ParsePage's copy %q", c)
			}
			got, err := s.p.Parse(body(s.tp, k))
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 && !s.p.Replayed() {
				t.Errorf("tp_rank %s, page %d: not read by the previous page's lines", s.tp, k)
			}
			if !reflect.DeepEqual(stripOwner(got), want) {
				t.Errorf("tp_rank %s, page %d: Parser's page of copy %q, %+v; want ParsePage's of copy %q, %+v",
					s.tp, k, got.Engines[0].Copy, got, want.Engines[0].Copy, want)
			}
			got.Release()
		}
	}
	if a.tmpl == nil || a.tmpl == b.tmpl {
		t.Error("the pages of two copies share a template")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}
