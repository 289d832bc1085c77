package remotewrite

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/keyset"
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/sink"
)

// Settings are a remote_write sink's settings, the keys of its entry under sinks.
type Settings struct {
	// URL is the receiver's write endpoint (url), e.g. http://prometheus:9090/api/v1/write.
	URL string `yaml:"url"`
	// BasicAuth is HTTP basic auth as written (basic_auth: {username, password or
	// password_file}); ParseSettings moves it into Username and Password.
	BasicAuth *BasicAuth `yaml:"basic_auth"`
	// Username and Password are HTTP basic auth.
	Username, Password string
	// BearerToken is sent as "Authorization: Bearer" (bearer_token, or the content of
	// bearer_token_file).
	BearerToken string `yaml:"bearer_token" secret:"true"`
	// BearerTokenFile is the file of the bearer token as written; ParseSettings reads it into
	// BearerToken.
	BearerTokenFile string `yaml:"bearer_token_file"`
	// ExtraLabels are added to every series (extra_labels), e.g. run, job, instance; sorted by
	// name.
	ExtraLabels ExtraLabels `yaml:"extra_labels"`
	// Headers are sent with every request (headers), e.g. X-Scope-OrgID for a Mimir tenant.
	Headers Headers `yaml:"headers"`
	// BatchSize is the most samples in one request (batch_size); default 2000.
	BatchSize int `yaml:"batch_size"`
	// Timeout bounds one request (timeout); default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// Intervals sends every worker's interval values too, at their scrape times (intervals).
	Intervals bool `yaml:"intervals"`
	// MaxRetries (max_retries) is accepted so that existing configs keep working, and not
	// used: the sink runtime retries a failed step, with MinBackoff/MaxBackoff, until it is
	// sent or the exit deadline passes. Interval samples are retried until they are delivered
	// or Close's deadline passes.
	MaxRetries int `yaml:"max_retries"`
	// QueueSize bounds the interval samples waiting or in flight (queue_size); default 100000.
	// Beyond it new samples are dropped and counted.
	QueueSize int `yaml:"queue_size"`
	// MinBackoff bounds the delay between retries from below (min_backoff); default 500ms. The
	// delay doubles from it up to MaxBackoff.
	MinBackoff time.Duration `yaml:"min_backoff"`
	// MaxBackoff bounds the delay between retries from above (max_backoff); default 30s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Settings are keys (a preset: summary, standard or all, the default), include and
	// exclude (globs of key names as steps.jsonl spells them), which choose the step's series
	// (see package keyset); the step number, duration, workers and scrapes are always sent,
	// and interval values are not chosen by them.
	keyset.Settings `yaml:",inline"`
}

// BasicAuth is a basic_auth mapping of a remote_write sink.
type BasicAuth struct {
	// Username is the user name; required.
	Username string `yaml:"username"`
	// Password is the password; never shown.
	Password string `yaml:"password" secret:"true"`
	// PasswordFile holds the password instead, read at start.
	PasswordFile string `yaml:"password_file"`
}

func (BasicAuth) UnknownKey() string { return "unknown setting; known:" }

func (BasicAuth) YAMLExample() string { return "{username: ..., password: ...}" }

// DefaultSettings returns the settings a sink entry leaves unset.
func DefaultSettings() Settings {
	return Settings{BatchSize: 2000, Timeout: 10 * time.Second, MaxRetries: 3, QueueSize: 100000,
		MinBackoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

func (Settings) UnknownKey() string { return "unknown setting of a remote_write sink; known:" }

func (Settings) YAMLExample() string {
	return "{type: remote_write, url: http://host:9090/api/v1/write}"
}

// ParseSettings decodes and checks a sink entry strictly; its error is a config.Problems that
// names every problem with its key path (spec.Path + ".url", ...) and, when it was given, its
// line. Files it names are read now, and their content replaces them.
func ParseSettings(spec config.SinkSpec) (Settings, error) {
	s := DefaultSettings()
	if spec.Settings == nil || spec.Settings.Kind != yaml.MappingNode {
		return s, config.Problems{spec.Path + ": remote_write needs settings, at least a url: {type: remote_write, url: http://host:9090/api/v1/write}"}
	}
	at, es := spec.Decode(&s)
	es = append(es, s.Validate(at)...)
	es = append(es, s.readFiles(at)...)
	if len(es) > 0 {
		slices.SortStableFunc(es, func(a, b yamlx.Error) int { return cmp.Compare(a.Line, b.Line) })
		ps := make(config.Problems, len(es))
		for i, e := range es {
			ps[i] = yamlx.Join(spec.Path, e.Path) + ": " + e.Msg
			if e.Line > 0 {
				ps[i] += fmt.Sprintf(" (line %d)", e.Line)
			}
		}
		return s, ps
	}
	return s, nil
}

// Validate checks the values a decode alone does not; at says where they were given.
func (s Settings) Validate(at yamlx.Where) yamlx.Errors {
	es := s.Settings.Validate(at)
	if at.Has("basic_auth") && (at.Has("bearer_token") || at.Has("bearer_token_file")) {
		es = append(es, at.Problem("bearer_token", "give basic_auth or a bearer token, not both"))
	}
	if at.Has("bearer_token") && at.Has("bearer_token_file") {
		es = append(es, at.Problem("bearer_token_file", "give bearer_token or bearer_token_file, not both"))
	}
	if at.Has("bearer_token") && s.BearerToken == "" {
		es = append(es, at.Problem("bearer_token", "must be a non-empty string (its value is not shown)"))
	}
	if b := s.BasicAuth; b != nil {
		if b.Username == "" {
			if at.Has("basic_auth.username") {
				es = append(es, at.NotAllowed("basic_auth.username", "", "must be a non-empty string"))
			} else {
				es = append(es, at.Problem("basic_auth.username", "missing"))
			}
		}
		if at.Has("basic_auth.password") && at.Has("basic_auth.password_file") {
			es = append(es, at.Problem("basic_auth.password_file", "give password or password_file, not both"))
		}
	}
	if !at.Has("url") {
		es = append(es, yamlx.Error{Path: "url", Msg: "missing: the receiver's write endpoint, e.g. http://prometheus:9090/api/v1/write"})
	} else if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		es = append(es, at.NotAllowed("url", s.URL, "must be an http or https URL with a host"))
	}
	for _, r := range []struct {
		key    string
		v      int
		lo, hi int
	}{{"batch_size", s.BatchSize, 1, 1_000_000}, {"max_retries", s.MaxRetries, 0, 1000}, {"queue_size", s.QueueSize, 1, 100_000_000}} {
		if at.Has(r.key) && (r.v < r.lo || r.v > r.hi) {
			es = append(es, at.NotAllowed(r.key, r.v, fmt.Sprintf("must be a whole number from %d to %d", r.lo, r.hi)))
		}
	}
	es = append(es, sink.CheckDurations(at, s.Timeout, s.MinBackoff, s.MaxBackoff)...)
	return es
}

// readFiles reads the token and password files into BearerToken and Password, and moves
// BasicAuth into Username and Password: the writer needs values, not files.
func (s *Settings) readFiles(at yamlx.Where) yamlx.Errors {
	var es yamlx.Errors
	read := func(key, path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			es = append(es, at.Problem(key, err.Error()))
		}
		return strings.TrimSpace(string(b))
	}
	if s.BearerTokenFile != "" {
		s.BearerToken = read("bearer_token_file", s.BearerTokenFile)
		s.BearerTokenFile = ""
	}
	if b := s.BasicAuth; b != nil {
		s.Username, s.Password = b.Username, b.Password
		if b.PasswordFile != "" {
			s.Password = read("basic_auth.password_file", b.PasswordFile)
		}
		s.BasicAuth = nil
	}
	return es
}

// ExtraLabels are labels added to every series, sorted by name.
type ExtraLabels []promname.Label

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// UnmarshalYAML reads a mapping of label names to values; names that vllmstat's series use
// are refused.
func (l *ExtraLabels) UnmarshalYAML(v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return yamlx.Problem(v, "must be a mapping of label names to values, e.g. {run: grpo-7, instance: shard-0}")
	}
	es := yamlx.Duplicates(v)
	var ls ExtraLabels
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i].Value, v.Content[i+1]
		bad := func(msg string) { es = append(es, yamlx.Error{Path: k, Line: x.Line, Msg: msg}) }
		switch {
		case !labelName.MatchString(k) || strings.HasPrefix(k, "__"):
			bad(fmt.Sprintf("%q is not a label name: letters, digits and _, not starting with a digit or __", k))
		case slices.Contains(promname.ReservedLabels, k):
			bad(fmt.Sprintf("%q is not allowed: vllmstat's series use it (%s)", k, strings.Join(promname.ReservedLabels, ", ")))
		case x.Kind != yaml.ScalarNode || x.Tag == "!!null" || x.Value == "":
			bad(yamlx.Show(x) + " is not allowed: must be a non-empty string")
		default:
			ls = append(ls, promname.Label{Name: k, Value: x.Value})
		}
	}
	if len(es) > 0 {
		return es
	}
	slices.SortFunc(ls, func(a, b promname.Label) int { return cmp.Compare(a.Name, b.Name) })
	*l = ls
	return nil
}

// Headers are HTTP headers sent with every request, by canonical name.
type Headers sink.Headers

// ownHeaders are set by the writer itself.
var ownHeaders = []string{"Authorization", "Content-Encoding", "Content-Length", "Content-Type", "Host", "User-Agent", "X-Prometheus-Remote-Write-Version"}

// UnmarshalYAML reads a mapping of header names to values; the writer's own headers are
// refused.
func (h *Headers) UnmarshalYAML(v *yaml.Node) error {
	m, err := sink.ParseHeaders(v, ownHeaders, " (use basic_auth or bearer_token for Authorization)")
	if err != nil {
		return err
	}
	*h = Headers(m)
	return nil
}
