package remotewrite

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/selfmetrics"
)

// Settings are a remote_write sink's settings, the keys of its entry under sinks.
type Settings struct {
	// URL is the receiver's write endpoint (url), e.g. http://prometheus:9090/api/v1/write.
	URL string
	// Username and Password are HTTP basic auth (basic_auth: {username, password or
	// password_file}).
	Username, Password string
	// BearerToken is sent as "Authorization: Bearer" (bearer_token or bearer_token_file).
	BearerToken string
	// ExtraLabels are added to every series (extra_labels), e.g. run, job, instance; sorted by
	// name.
	ExtraLabels []selfmetrics.Label
	// Headers are sent with every request (headers), e.g. X-Scope-OrgID for a Mimir tenant.
	Headers map[string]string
	// BatchSize is the most samples in one request (batch_size); default 2000.
	BatchSize int
	// Timeout bounds one request (timeout); default 10s.
	Timeout time.Duration
	// Intervals sends every worker's interval values too, at their scrape times (intervals).
	Intervals bool
	// MaxRetries is how often a step's request is retried before Write gives up and leaves the
	// step to the sink queue's own retries (max_retries); default 3. Interval samples are
	// retried until they are delivered or Close's deadline passes.
	MaxRetries int
	// QueueSize bounds the interval samples waiting or in flight (queue_size); default 100000.
	// Beyond it new samples are dropped and counted.
	QueueSize int
	// MinBackoff and MaxBackoff bound the delay between retries, which doubles from the first
	// to the second (min_backoff, max_backoff); default 500ms and 30s.
	MinBackoff, MaxBackoff time.Duration
}

// DefaultSettings returns the settings a sink entry leaves unset.
func DefaultSettings() Settings {
	return Settings{BatchSize: 2000, Timeout: 10 * time.Second, MaxRetries: 3, QueueSize: 100000,
		MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

var keys = []string{"type", "url", "basic_auth", "bearer_token", "bearer_token_file", "extra_labels", "headers", "batch_size",
	"timeout", "intervals", "max_retries", "queue_size", "min_backoff", "max_backoff"}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ParseSettings decodes and checks a sink entry strictly; its error is a config.Problems that
// names every problem with its key path (spec.Path + ".url", ...).
func ParseSettings(spec config.SinkSpec) (Settings, error) {
	s := DefaultSettings()
	var ps config.Problems
	bad := func(key, format string, args ...any) {
		ps = append(ps, spec.Path+"."+key+": "+fmt.Sprintf(format, args...))
	}
	n := spec.Settings
	if n == nil || n.Kind != yaml.MappingNode {
		return s, config.Problems{spec.Path + ": remote_write needs settings, at least a url: {type: remote_write, url: http://host:9090/api/v1/write}"}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch k {
		case "type":
		case "url":
			s.URL = str(v, k, bad)
		case "basic_auth":
			s.Username, s.Password = basicAuth(v, bad)
		case "bearer_token":
			s.BearerToken = str(v, k, bad)
		case "bearer_token_file":
			if p := str(v, k, bad); p != "" {
				b, err := os.ReadFile(p)
				if err != nil {
					bad(k, "%v", err)
				}
				s.BearerToken = strings.TrimSpace(string(b))
			}
		case "extra_labels":
			s.ExtraLabels = extraLabels(v, bad)
		case "headers":
			s.Headers = headers(v, bad)
		case "batch_size":
			s.BatchSize = integer(v, k, 1, 1_000_000, bad)
		case "timeout":
			s.Timeout = duration(v, k, bad)
		case "intervals":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" || v.Decode(&s.Intervals) != nil {
				bad(k, "%q is not allowed: must be true or false", v.Value)
			}
		case "max_retries":
			s.MaxRetries = integer(v, k, 0, 1000, bad)
		case "queue_size":
			s.QueueSize = integer(v, k, 1, 100_000_000, bad)
		case "min_backoff":
			s.MinBackoff = duration(v, k, bad)
		case "max_backoff":
			s.MaxBackoff = duration(v, k, bad)
		default:
			bad(k, "unknown setting of a remote_write sink; known: %s", strings.Join(keys[1:], ", "))
		}
	}
	if has(n, "basic_auth") && (has(n, "bearer_token") || has(n, "bearer_token_file")) {
		bad("bearer_token", "give basic_auth or a bearer token, not both")
	}
	if has(n, "bearer_token") && has(n, "bearer_token_file") {
		bad("bearer_token_file", "give bearer_token or bearer_token_file, not both")
	}
	if s.URL == "" {
		if !has(n, "url") {
			bad("url", "missing: the receiver's write endpoint, e.g. http://prometheus:9090/api/v1/write")
		}
	} else if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("url", "%q is not allowed: must be an http or https URL with a host", s.URL)
	}
	if s.MinBackoff > s.MaxBackoff {
		bad("min_backoff", "%s is not allowed: must not exceed max_backoff (%s)", s.MinBackoff, s.MaxBackoff)
	}
	if len(ps) > 0 {
		return s, ps
	}
	return s, nil
}

func has(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

type badFunc func(key, format string, args ...any)

func str(v *yaml.Node, key string, bad badFunc) string {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Value == "" {
		bad(key, "%q is not allowed: must be a non-empty string", v.Value)
		return ""
	}
	return v.Value
}

func integer(v *yaml.Node, key string, lo, hi int, bad badFunc) int {
	x, err := strconv.Atoi(v.Value)
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || x < lo || x > hi {
		bad(key, "%q is not allowed: must be a whole number from %d to %d", v.Value, lo, hi)
		return 0
	}
	return x
}

func duration(v *yaml.Node, key string, bad badFunc) time.Duration {
	if v.Kind == yaml.ScalarNode {
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil && f > 0 {
			return time.Duration(f * float64(time.Second))
		}
		if d, err := time.ParseDuration(v.Value); err == nil && d > 0 {
			return d
		}
	}
	bad(key, "%q is not allowed: must be a duration > 0 such as 10s or 500ms, or a number of seconds", v.Value)
	return 0
}

func basicAuth(v *yaml.Node, bad badFunc) (user, pass string) {
	if v.Kind != yaml.MappingNode {
		bad("basic_auth", "must be a mapping: {username: ..., password: ...}")
		return "", ""
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i].Value, v.Content[i+1]
		switch k {
		case "username":
			user = str(x, "basic_auth.username", bad)
		case "password":
			pass = str(x, "basic_auth.password", bad)
		case "password_file":
			if p := str(x, "basic_auth.password_file", bad); p != "" {
				b, err := os.ReadFile(p)
				if err != nil {
					bad("basic_auth.password_file", "%v", err)
				}
				pass = strings.TrimSpace(string(b))
			}
		default:
			bad("basic_auth."+k, "unknown setting; known: username, password, password_file")
		}
	}
	if user == "" && !has(v, "username") {
		bad("basic_auth.username", "missing")
	}
	if has(v, "password") && has(v, "password_file") {
		bad("basic_auth.password_file", "give password or password_file, not both")
	}
	return user, pass
}

func extraLabels(v *yaml.Node, bad badFunc) []selfmetrics.Label {
	if v.Kind != yaml.MappingNode {
		bad("extra_labels", "must be a mapping of label names to values, e.g. {run: grpo-7, instance: shard-0}")
		return nil
	}
	var ls []selfmetrics.Label
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i].Value, v.Content[i+1]
		key := "extra_labels." + k
		switch {
		case !labelName.MatchString(k) || strings.HasPrefix(k, "__"):
			bad(key, "%q is not a label name: letters, digits and _, not starting with a digit or __", k)
		case slices.Contains(selfmetrics.ReservedLabels, k):
			bad(key, "%q is not allowed: vllmstat's series use it (%s)", k, strings.Join(selfmetrics.ReservedLabels, ", "))
		case x.Kind != yaml.ScalarNode || x.Value == "":
			bad(key, "%q is not allowed: must be a non-empty string", x.Value)
		default:
			ls = append(ls, selfmetrics.Label{Name: k, Value: x.Value})
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	return ls
}

// ownHeaders are set by the writer itself.
var ownHeaders = []string{"Authorization", "Content-Encoding", "Content-Length", "Content-Type", "Host", "User-Agent", "X-Prometheus-Remote-Write-Version"}

func headers(v *yaml.Node, bad badFunc) map[string]string {
	if v.Kind != yaml.MappingNode {
		bad("headers", "must be a mapping of header names to values, e.g. {X-Scope-OrgID: team-a}")
		return nil
	}
	h := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := http.CanonicalHeaderKey(v.Content[i].Value), v.Content[i+1]
		key := "headers." + v.Content[i].Value
		switch {
		case !headerName.MatchString(k):
			bad(key, "%q is not a header name", v.Content[i].Value)
		case slices.Contains(ownHeaders, k):
			bad(key, "%q is not allowed: the writer sets it (use basic_auth or bearer_token for Authorization)", k)
		case x.Kind != yaml.ScalarNode || x.Tag == "!!null":
			bad(key, "must be a string")
		default:
			h[k] = x.Value
		}
	}
	return h
}

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
