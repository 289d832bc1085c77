package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/page"
	"github.com/vllmstat/vllmstat/internal/target"
)

func TestCredentials(t *testing.T) {
	c, err := Load("testdata/auth.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	wantURLs := []string{"http://10.0.0.1:8000/metrics", "http://10.0.0.2:8000/metrics", "https://10.0.0.3/metrics",
		"http://10.0.0.4:8000/metrics", "http://10.0.0.5:8000/metrics"}
	if got := strings.Join(urls(c.Targets), " "); got != strings.Join(wantURLs, " ") {
		t.Fatalf("targets %s, want %v", got, wantURLs)
	}
	basic := func(i int) (string, string, string) {
		b := c.Targets[i].Auth.Basic
		if b == nil {
			t.Fatalf("targets[%d] has no basic auth: %v", i, c.Targets[i].Auth)
		}
		return b.Username.Reveal(), b.Password.Reveal(), b.PasswordFile
	}
	if u, p, _ := basic(0); u != "usr-top-x7" || p != "pw-top-x7" {
		t.Errorf("targets[0]: the top-level basic_auth, got %q %q", u, p)
	}
	if u, p, _ := basic(1); u != "usr-url-x7" || p != "pw-url-x7" {
		t.Errorf("targets[1]: user info, got %q %q", u, p)
	}
	if az := c.Targets[2].Auth.Authorization; az == nil || az.Type != "Bearer" || az.CredentialsFile != filepath.Join("testdata", "secrets", "token") {
		t.Errorf("targets[2]: %+v, want a Bearer credentials file relative to the config file", az)
	}
	if u, _, f := basic(3); u != "usr-own-x7" || f != filepath.Join("testdata", "secrets", "password") {
		t.Errorf("targets[3]: %q %q", u, f)
	}
	if az := c.Targets[4].Auth.Authorization; az == nil || az.Type != "Token" || az.Credentials.Reveal() != "tok-own-x7" {
		t.Errorf("targets[4]: %+v", az)
	}
	if !c.MetricsPublic || c.Limits() != (page.Limits{MaxSeries: 5000, MaxWorkers: 8}) {
		t.Errorf("metrics_public %v limits %+v", c.MetricsPublic, c.Limits())
	}
	// Printed every way, the configuration shows no user info.
	out := fmt.Sprintf("%v %+v %#v", c, c, c)
	for _, s := range []string{"x7"} {
		if strings.Contains(out, s) {
			t.Errorf("the printed config shows %q:\n%s", s, out)
		}
	}
}

func TestBadCredentials(t *testing.T) {
	c, err := Load("testdata/auth.bad.yaml")
	if err == nil {
		err = c.Validate()
	}
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"targets[0].basic_auth (line 3): give password or password_file, not both",
		"targets[1].authorization.type (line 5): use basic_auth for basic authentication",
		`targets[2].authorization.credentials_file (line 7): read "testdata/secrets/missing": no such file or directory`,
		`targets[3].authorization.credentials_file (line 9): "testdata/secrets/empty" is empty`,
		"targets[4].basic_auth.pasword (line 11): unknown key; the keys here are username, password, password_file",
		"targets[5] (line 12): give basic_auth or authorization, not both",
		"targets[9] (line 19): a target mapping needs url",
		"targets[10].authorization.credentials (line 21): must be a non-empty string (its value is not shown)",
		"authorization (line 22): needs credentials or a credentials_file",
		`max_series_per_target (line 23): "0" is not allowed: must be a whole number > 0`,
		`max_workers_per_target (line 24): "many" is not allowed`,
		`metrics_public (line 25): "sure" is not allowed: must be true or false`,
		`vllm_cfg.vllm_metrics_logger_interval (line 27): "0.005" is not allowed: must be a number of seconds > 0, at least 0.01 (10 ms)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "x7") {
		t.Errorf("the error shows a secret:\n%s", msg)
	}
	if n := strings.Count(msg, "needs credentials"); n != 1 {
		t.Errorf("%d problems say credentials are missing, want 1 (the top level's; the others have a problem of their own):\n%s", n, msg)
	}
	// Validate's problems: the URLs' own, also without user info.
	c2 := Default()
	c2.Targets = TargetsOf([]string{"http://u:pw-x7@h:1/metrics", "http://u:other-x7@h:1/metrics", "http://u:pw-x7@h:1",
		"http://u:pw-x7@h:port/metrics", "ftp://u:pw-x7@h/metrics"})
	c2.Targets = append(c2.Targets, target.Target{URL: "http://u:pw-x7@g:1/metrics", Auth: target.Auth{Authorization: &target.Authorization{Credentials: target.NewSecret("tok-x7")}}})
	err = c2.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	msg = err.Error()
	for _, want := range []string{
		`targets[1]: "http://<secret>@h:1/metrics" is targets[0] with other credentials`,
		`targets[2]: "http://<secret>@h:1" is listed twice`,
		`targets[3]: "http://<secret>@h:port/metrics" is not allowed: not a URL`,
		`targets[4]: "ftp://<secret>@h/metrics" is not allowed: scheme "ftp"`,
		`targets[5]: "http://<secret>@g:1/metrics" has credentials both in its URL and in basic_auth or authorization`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "x7") {
		t.Errorf("the error shows a secret:\n%s", msg)
	}
}

func TestIntervalFloor(t *testing.T) {
	for _, tt := range []struct {
		interval float64
		ok       bool
	}{{0.01, true}, {0.5, true}, {0.0099, false}, {0, false}, {3600, true}, {3601, false}} {
		c := Default()
		c.Targets = TargetsOf([]string{"h:1"})
		c.Interval = tt.interval
		c.StepEvery = 0
		c.SetPath(KeyInterval, "--interval")
		err := c.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("interval %g: %v", tt.interval, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--interval: ") || err != nil && !strings.Contains(err.Error(), "at least 0.01 (10 ms)") {
			t.Errorf("interval %g: error %q does not name the flag and the floor", tt.interval, err)
		}
	}
	c := Default()
	if c.Limits() != page.DefaultLimits {
		t.Errorf("default limits %+v, want %+v", c.Limits(), page.DefaultLimits)
	}
}

// TestCredentialsFileRelativeToWorkingDirectory: Parse (no file) leaves relative paths as
// they are, relative to the working directory.
func TestCredentialsFileRelativeToWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	c, err := Parse([]byte("targets: [h:1]\nbasic_auth: {username: u, password_file: pw}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Targets[0].Auth.Basic == nil || c.Targets[0].Auth.Basic.PasswordFile != "pw" {
		t.Fatalf("%v %+v", err, c.Targets)
	}
}
