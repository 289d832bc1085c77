package sink

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
)

// Headers are HTTP headers a network sink sends with every request, by canonical name, as a
// sinks entry's headers mapping gives them. Their values are never quoted in a message: they
// may carry a token.
type Headers map[string]string

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// ParseHeaders reads a mapping of header names to values; the names in own, which the sink
// sets itself, are refused with why (e.g. "use basic_auth or bearer_token for Authorization").
func ParseHeaders(v *yaml.Node, own []string, why string) (Headers, error) {
	if v.Kind != yaml.MappingNode {
		return nil, yamlx.Problem(v, "must be a mapping of header names to values, e.g. {X-Scope-OrgID: team-a}")
	}
	es := yamlx.Duplicates(v)
	out := Headers{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		raw, x := v.Content[i].Value, v.Content[i+1]
		k := http.CanonicalHeaderKey(raw)
		bad := func(msg string) { es = append(es, yamlx.Error{Path: raw, Line: x.Line, Msg: msg}) }
		switch {
		case !headerName.MatchString(k):
			bad(fmt.Sprintf("%q is not a header name", raw))
		case slices.Contains(own, k):
			bad(fmt.Sprintf("%q is not allowed: the sink sets it%s", k, why))
		case x.Kind != yaml.ScalarNode || x.Tag == "!!null":
			bad("must be a string")
		case out[k] != "":
			bad(fmt.Sprintf("is %q again: header names are case-insensitive; give it once", k))
		default:
			out[k] = x.Value
		}
	}
	if len(es) > 0 {
		return nil, es
	}
	return out, nil
}

// CheckDurations checks a network sink's timeout, min_backoff and max_backoff settings, where
// at says they were given: each > 0, and min_backoff not over max_backoff.
func CheckDurations(at yamlx.Where, timeout, minBackoff, maxBackoff time.Duration) yamlx.Errors {
	var es yamlx.Errors
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"timeout", timeout}, {"min_backoff", minBackoff}, {"max_backoff", maxBackoff}} {
		if at.Has(d.key) && d.v <= 0 {
			es = append(es, at.NotAllowed(d.key, d.v, "must be a duration > 0 such as 10s or 500ms, or a number of seconds"))
		}
	}
	if minBackoff > maxBackoff {
		es = append(es, at.Problem("min_backoff", fmt.Sprintf("%s is not allowed: must not exceed max_backoff (%s)", minBackoff, maxBackoff)))
	}
	return es
}
