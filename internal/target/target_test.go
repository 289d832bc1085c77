package target

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		raw, url string
		user, pw string // basic auth taken from the URL, if any
		err      string
	}{
		{raw: "h:8000", url: "http://h:8000/metrics"},
		{raw: " http://h:8000 ", url: "http://h:8000/metrics"},
		{raw: "HTTP://h:8000/m", url: "http://h:8000/m"},
		{raw: "HttpS://h/x?a=1", url: "https://h/x?a=1"},
		{raw: "http://usr:p%40ss@h:8000/metrics", url: "http://h:8000/metrics", user: "usr", pw: "p@ss"},
		{raw: "http://:tok@h", url: "http://h/metrics", pw: "tok"},
		{raw: "usr@h:1", url: "http://h:1/metrics", user: "usr"},
		{raw: "usr:hunter2@h:1", err: "want a URL"},
		{raw: "ftp://h/metrics", err: `scheme "ftp"`},
		{raw: "http:///metrics", err: "no host"},
		{raw: "not a target", err: "want a URL"},
		{raw: "http://usr:hunter2@h:port/", err: "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := Parse(tt.raw)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.URL != tt.url {
				t.Errorf("URL %q, want %q", got.URL, tt.url)
			}
			if tt.user == "" && tt.pw == "" {
				if !got.Auth.IsZero() {
					t.Errorf("credentials %v from a URL without user info", got.Auth)
				}
				return
			}
			if b := got.Auth.Basic; b == nil || b.Username.Reveal() != tt.user || b.Password.Reveal() != tt.pw {
				t.Errorf("basic auth %+v, want %q/%q", b, tt.user, tt.pw)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"http://u:pw@h:1/metrics":  "http://<secret>@h:1/metrics",
		"u:pw@h:1":                 "<secret>@h:1",
		"http://u:p/w@h:x/metrics": "http://<secret>@h:x/metrics",
		"http://h:1/metrics":       "http://h:1/metrics",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

// TestSecretsNeverPrint prints, encodes and logs targets and secrets every way Go offers: the
// user name and password must never come out.
func TestSecretsNeverPrint(t *testing.T) {
	tg, err := Parse("http://usr-x7:pw-x7@h:8000/metrics")
	if err != nil {
		t.Fatal(err)
	}
	az := Target{URL: "http://h:9/metrics", Auth: Auth{Authorization: &Authorization{Type: "Bearer", Credentials: NewSecret("tok-x7")}}}
	hidden := struct {
		s Secret // unexported: fmt cannot call its methods, and must still not see the value
		a Auth
	}{NewSecret("pw-x7"), tg.Auth}
	var out bytes.Buffer
	raw := Target{URL: "http://usr-x7:pw-x7@h:8000/metrics"} // not parsed yet
	for _, v := range []any{raw, tg, &tg, az, tg.Auth, *tg.Auth.Basic, tg.Auth.Basic, hidden, &hidden, NewSecret("pw-x7")} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
	}
	for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
		slog.New(h).Info("x", "target", tg, "auth", tg.Auth, "basic", tg.Auth.Basic, "secret", NewSecret("pw-x7"), "az", az)
	}
	for _, s := range []string{"usr-x7", "pw-x7", "tok-x7", fmt.Sprintf("%x", "pw-x7")} {
		if strings.Contains(out.String(), s) {
			t.Errorf("%q printed:\n%s", s, out.String())
		}
	}
	if !strings.Contains(out.String(), "<secret>") || !strings.Contains(out.String(), "http://h:8000/metrics") {
		t.Errorf("what was printed lacks the URL or <secret>:\n%s", out.String())
	}
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := ReadSecretFile(write("ok", "\n  tok-x7 \r\n")); err != nil || s != "tok-x7" {
		t.Errorf("%q %v", s, err)
	}
	for name, content := range map[string]string{"empty": " \n", "big": strings.Repeat("tok-x7", 20000)} {
		if _, err := ReadSecretFile(write(name, content)); err == nil || strings.Contains(err.Error(), "tok-x7") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ReadSecretFile("/dev/zero"); err == nil {
		t.Error("/dev/zero read as a credential")
	}
}

// TestApply checks the Authorization header of each kind of credentials, and that a credentials
// file is read when Apply runs: a missing one fails with ErrCredentials naming the key.
func TestApply(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "token")
	tests := []struct {
		name     string
		auth     Auth
		fromFile bool
		want     string // the Authorization header
	}{
		{name: "none", want: ""},
		{name: "basic", auth: Auth{Basic: &BasicAuth{Username: NewSecret("usr"), Password: NewSecret("pw")}}, want: "Basic dXNyOnB3"},
		{name: "basic from a file", auth: Auth{Basic: &BasicAuth{Username: NewSecret("usr"), PasswordFile: tokFile}}, fromFile: true, want: "Basic dXNyOnRvay14Nw=="},
		{name: "bearer by default", auth: Auth{Authorization: &Authorization{Credentials: NewSecret("tok")}}, want: "Bearer tok"},
		{name: "own type", auth: Auth{Authorization: &Authorization{Type: "Token", Credentials: NewSecret("tok")}}, want: "Token tok"},
		{name: "credentials from a file", auth: Auth{Authorization: &Authorization{CredentialsFile: tokFile}}, fromFile: true, want: "Bearer tok-x7"},
	}
	if err := os.WriteFile(tokFile, []byte("tok-x7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.auth.FromFile(); got != tt.fromFile {
				t.Errorf("FromFile() = %v, want %v", got, tt.fromFile)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://h/metrics", nil)
			if err := tt.auth.Apply(req); err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Get("Authorization"); got != tt.want {
				t.Errorf("Authorization %q, want %q", got, tt.want)
			}
		})
	}
	os.Remove(tokFile)
	for _, tt := range tests {
		if !tt.fromFile {
			continue
		}
		req, _ := http.NewRequest(http.MethodGet, "http://h/metrics", nil)
		err := tt.auth.Apply(req)
		if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "_file") {
			t.Errorf("%s, the file gone: %v, want ErrCredentials naming the key", tt.name, err)
		}
		if req.Header.Get("Authorization") != "" {
			t.Errorf("%s, the file gone: Authorization %q set", tt.name, req.Header.Get("Authorization"))
		}
	}
}
