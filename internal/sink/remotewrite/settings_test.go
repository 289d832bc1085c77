package remotewrite

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/config"
	"github.com/vllmstat/vllmstat/internal/promname"
	"github.com/vllmstat/vllmstat/internal/testkit/sinkspec"
)

func TestParseSettingsGood(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ParseSettings(sinkspec.Parse(t, "sinks[2]", `
type: remote_write
url: https://mimir.example/api/v1/push
bearer_token_file: `+tok+`
extra_labels: {run: grpo-7, instance: shard-0, job: rl}
headers: {x-scope-orgid: team-a}
batch_size: 500
timeout: 5s
intervals: true
max_retries: 0
queue_size: 1000
min_backoff: 0.1
max_backoff: 10s
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{URL: "https://mimir.example/api/v1/push", BearerToken: "abc",
		ExtraLabels: []promname.Label{{Name: "instance", Value: "shard-0"}, {Name: "job", Value: "rl"}, {Name: "run", Value: "grpo-7"}},
		Headers:     map[string]string{"X-Scope-Orgid": "team-a"},
		BatchSize:   500, Timeout: 5 * time.Second, Intervals: true, MaxRetries: 0, QueueSize: 1000,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	got, err = ParseSettings(sinkspec.Parse(t, "sinks[2]", "{type: remote_write, url: 'http://127.0.0.1:9090/api/v1/write', basic_auth: {username: u, password: p}}"))
	if err != nil {
		t.Fatal(err)
	}
	want = DefaultSettings()
	want.URL, want.Username, want.Password = "http://127.0.0.1:9090/api/v1/write", "u", "p"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %+v\nwant %+v", got, want)
	}
}

func TestParseSettingsBad(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"no url", "{type: remote_write, batch_size: 10}", []string{"sinks[2].url: missing"}},
		{"not http", "{type: remote_write, url: 'ftp://x/y'}", []string{`sinks[2].url: "ftp://x/y" is not allowed`}},
		{"no host", "{type: remote_write, url: 'http:///api/v1/write'}", []string{"sinks[2].url:"}},
		{"typo", "{type: remote_write, url: 'http://x', batchsize: 10}", []string{"sinks[2].batchsize: unknown setting", "batch_size"}},
		{"zero batch", "{type: remote_write, url: 'http://x', batch_size: 0}", []string{`sinks[2].batch_size: "0" is not allowed`}},
		{"float batch", "{type: remote_write, url: 'http://x', batch_size: 1.5}", []string{`sinks[2].batch_size: "1.5"`}},
		{"bad timeout", "{type: remote_write, url: 'http://x', timeout: soon}", []string{`sinks[2].timeout: "soon" is not allowed`}},
		{"negative retries", "{type: remote_write, url: 'http://x', max_retries: -1}", []string{`sinks[2].max_retries: "-1"`}},
		{"yes is not a bool", "{type: remote_write, url: 'http://x', intervals: yes}", []string{`sinks[2].intervals: "yes" is not allowed`}},
		{"reserved label", "{type: remote_write, url: 'http://x', extra_labels: {target: a}}", []string{`sinks[2].extra_labels.target: "target" is not allowed`}},
		{"phase label", "{type: remote_write, url: 'http://x', extra_labels: {phase: a}}", []string{`sinks[2].extra_labels.phase: "phase" is not allowed`}},
		{"bad label", "{type: remote_write, url: 'http://x', extra_labels: {__x: a, 1a: b}}", []string{"sinks[2].extra_labels.__x:", "sinks[2].extra_labels.1a:"}},
		{"empty label", "{type: remote_write, url: 'http://x', extra_labels: {run: ''}}", []string{"sinks[2].extra_labels.run:"}},
		{"two auths", "{type: remote_write, url: 'http://x', bearer_token: t, basic_auth: {username: u}}", []string{"sinks[2].bearer_token: give basic_auth or a bearer token, not both"}},
		{"auth typo", "{type: remote_write, url: 'http://x', basic_auth: {user: u}}", []string{"sinks[2].basic_auth.user: unknown", "sinks[2].basic_auth.username: missing"}},
		{"no token file", "{type: remote_write, url: 'http://x', bearer_token_file: /nonexistent/token}", []string{"sinks[2].bearer_token_file:", "no such file"}},
		{"own header", "{type: remote_write, url: 'http://x', headers: {content-type: text/plain}}", []string{`sinks[2].headers.content-type: "Content-Type" is not allowed`}},
		{"bad header", "{type: remote_write, url: 'http://x', headers: {'a b': c}}", []string{`sinks[2].headers.a b: "a b" is not a header name`}},
		{"backoffs", "{type: remote_write, url: 'http://x', min_backoff: 1m, max_backoff: 1s}", []string{"sinks[2].min_backoff:"}},
		{"did you mean", "{type: remote_write, url: 'http://x', max_retires: 2}", []string{"sinks[2].max_retires: unknown setting of a remote_write sink; known: type, url,", "; did you mean max_retries? (line 1)"}},
		{"duplicate", "type: remote_write\nurl: 'http://x'\nheaders: {a: b, A: c}\nurl: 'http://y'\n", []string{"sinks[2].url: is given twice, at lines 2 and 4", `sinks[2].headers.A: is "A" again`}},
		{"secret not shown", "{type: remote_write, url: 'http://x', bearer_token: [tok-x7], basic_auth: {username: u, password: {p: pw-x7}}}", []string{"sinks[2].bearer_token: must be a string (its value is not shown)", "sinks[2].basic_auth.password: must be a string (its value is not shown)"}},
		{"no settings", "remote_write", []string{"sinks[2]: remote_write needs settings"}},
		{"all at once", "{type: remote_write, batch_size: x, timeout: -1s}", []string{"sinks[2].url: missing", "sinks[2].batch_size:", "sinks[2].timeout:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSettings(sinkspec.Parse(t, "sinks[2]", tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if _, ok := err.(config.Problems); !ok {
				t.Errorf("error is a %T, want config.Problems", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "x7") {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
	if _, err := New(sinkspec.Parse(t, "sinks[2]", "{type: remote_write}"), "vllm", nil); err == nil {
		t.Error("New accepted settings without a url")
	}
}
