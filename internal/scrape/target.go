package scrape

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Target is one /metrics page to scrape: its URL, which is the target's identity everywhere
// (worker ids, logs, /metrics labels, records, recordings) and never holds user info, and the
// credentials its scrapes send, and the labels discovery gave it (file_sd), which travel with
// its workers into the step records and remote write. Labels is never changed in place: a
// change is a new map.
type Target struct {
	URL    string
	Auth   Auth
	Labels map[string]string
}

// String returns the URL: printing a Target never shows its credentials, even one whose URL
// still holds user info (a config entry before config.Validate moved it out).
func (t Target) String() string {
	if u, err := url.Parse(t.URL); err == nil && u.User == nil {
		return t.URL
	}
	return Redact(t.URL)
}

// GoString is String, for %#v.
func (t Target) GoString() string { return t.String() }

// MarshalJSON encodes the URL as String gives it, without credentials.
func (t Target) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// LogValue logs String.
func (t Target) LogValue() slog.Value { return slog.StringValue(t.String()) }

// Auth is how a target's scrapes authenticate: HTTP basic auth, an Authorization header, or
// neither (both nil). Files are read on every scrape, so that a rotated credential is picked up
// as Prometheus does.
type Auth struct {
	Basic         *BasicAuth
	Authorization *Authorization
}

// BasicAuth is sent as HTTP basic auth. The password is Password, or the content of
// PasswordFile (without surrounding white space). The user name is user info too, kept as
// secret as the password.
type BasicAuth struct {
	Username     Secret
	Password     Secret
	PasswordFile string
}

// Authorization is sent as the header "Authorization: <Type> <credentials>", the credentials
// being Credentials or the content of CredentialsFile (without surrounding white space).
type Authorization struct {
	Type            string
	Credentials     Secret
	CredentialsFile string
}

// IsZero reports that a has no credentials.
func (a Auth) IsZero() bool { return a.Basic == nil && a.Authorization == nil }

// Equal reports that a and b send the same credentials.
func (a Auth) Equal(b Auth) bool {
	switch {
	case (a.Basic == nil) != (b.Basic == nil), (a.Authorization == nil) != (b.Authorization == nil):
		return false
	case a.Basic != nil && (a.Basic.Username.Reveal() != b.Basic.Username.Reveal() || a.Basic.Password.Reveal() != b.Basic.Password.Reveal() ||
		a.Basic.PasswordFile != b.Basic.PasswordFile):
		return false
	case a.Authorization != nil && (a.Authorization.Type != b.Authorization.Type ||
		a.Authorization.Credentials.Reveal() != b.Authorization.Credentials.Reveal() ||
		a.Authorization.CredentialsFile != b.Authorization.CredentialsFile):
		return false
	}
	return true
}

// String names the kind of credentials only, so that %v of a Target or an Auth never shows a
// user name or a secret.
func (a Auth) String() string {
	switch {
	case a.Basic != nil:
		return "basic_auth"
	case a.Authorization != nil:
		return "authorization"
	}
	return "none"
}

// ErrCredentials is the failure to read a credentials file at scrape time.
var ErrCredentials = errors.New("cannot read credentials")

// fromFile reports that a's secret is read from a file, on every scrape.
func (a *Auth) fromFile() bool {
	return a.Basic != nil && a.Basic.PasswordFile != "" || a.Authorization != nil && a.Authorization.CredentialsFile != ""
}

// apply sets the request's credentials. They go in the Authorization header (never in the
// URL), which net/http drops when a redirect leads to another host.
func (a *Auth) apply(req *http.Request) error {
	switch {
	case a.Basic != nil:
		pw, err := secretOrFile(a.Basic.Password, a.Basic.PasswordFile, "basic_auth.password_file")
		if err != nil {
			return err
		}
		req.SetBasicAuth(a.Basic.Username.Reveal(), pw)
	case a.Authorization != nil:
		cred, err := secretOrFile(a.Authorization.Credentials, a.Authorization.CredentialsFile, "authorization.credentials_file")
		if err != nil {
			return err
		}
		typ := a.Authorization.Type
		if typ == "" {
			typ = "Bearer"
		}
		req.Header.Set("Authorization", typ+" "+cred)
	}
	return nil
}

func secretOrFile(s Secret, path, key string) (string, error) {
	if path == "" {
		return s.Reveal(), nil
	}
	v, err := ReadSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrCredentials, key, err)
	}
	return v, nil
}

// maxSecretFile bounds a credentials file: a path to something else (a log, /dev/zero) must not
// be read whole.
const maxSecretFile = 64 << 10

// ReadSecretFile reads a credentials file: its content without surrounding white space. An
// error names the file, never its content.
func ReadSecretFile(path string) (string, error) {
	b, err := readAtMost(path, maxSecretFile)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("read %q: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%q is larger than %d KiB: not a credentials file", path, maxSecretFile>>10)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%q is empty", path)
	}
	return s, nil
}

func readAtMost(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n+1))
}

// Secret holds a credential. It prints, logs and encodes as "<secret>" whatever the verb or
// encoder; Reveal is the only way to its value. The value sits behind a pointer so that even
// reflection-based printing of a struct holding a Secret in an unexported field shows an
// address, not the value.
type Secret struct{ v *string }

// NewSecret returns a Secret holding s.
func NewSecret(s string) Secret { return Secret{v: &s} }

// Reveal returns the value, for the one place that sends it.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

const redacted = "<secret>"

// Format writes "<secret>" for every verb (%v, %+v, %#v, %s, %q, %x, ...).
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// String returns "<secret>".
func (Secret) String() string { return redacted }

// GoString returns "<secret>".
func (Secret) GoString() string { return redacted }

// MarshalJSON encodes "<secret>".
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText encodes "<secret>".
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue logs "<secret>".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// ParseTarget reads a target as written in a config file, a flag or an API call: a URL, or
// host:port meaning http://host:port/metrics. The scheme may be written in any case; a URL
// without a path gets /metrics. User info in the URL becomes the target's basic-auth
// credentials and leaves the URL. Its errors never quote raw (use Redact for that).
func ParseTarget(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err != nil {
			return Target{}, fmt.Errorf("want a URL such as http://host:8000/metrics or host:port")
		}
		raw = "http://" + raw + "/metrics"
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the URL, user info included
		}
		return Target{}, fmt.Errorf("not a URL: %v", err)
	}
	u.Scheme = strings.ToLower(u.Scheme) // schemes are case-insensitive (RFC 3986)
	if u.Scheme != "http" && u.Scheme != "https" {
		return Target{}, fmt.Errorf("scheme %q: only http and https", u.Scheme)
	}
	if u.Host == "" {
		return Target{}, fmt.Errorf("no host")
	}
	if u.Path == "" {
		u.Path = "/metrics"
	}
	var t Target
	if u.User != nil {
		pw, _ := u.User.Password()
		t.Auth.Basic = &BasicAuth{Username: NewSecret(u.User.Username()), Password: NewSecret(pw)}
		u.User = nil
	}
	t.URL = u.String()
	return t, nil
}

// Redact returns a target as written with any user info replaced by "<secret>", for error
// messages about targets that may not even parse. It errs on the side of hiding: everything up
// to the last "@" after the scheme goes.
func Redact(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	if j := strings.LastIndex(rest, "@"); j >= 0 {
		return prefix + redacted + rest[j:]
	}
	return raw
}
