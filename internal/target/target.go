// Package target describes what vllmstat scrapes: a target's URL, the credentials its scrapes
// send and the labels discovery gave it. The URL is the target's identity everywhere and never
// holds user info: Parse moves it to the credentials. Credentials never print, log or encode: a
// Target shows its URL, an Auth the kind of its credentials, a Secret "<secret>".
package target

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
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

// Parse reads a target as written in a config file, a flag or an API call: a URL, or
// host:port meaning http://host:port/metrics. The scheme may be written in any case; a URL
// without a path gets /metrics. User info in the URL becomes the target's basic-auth
// credentials and leaves the URL. Its errors never quote raw (use Redact for that).
func Parse(raw string) (Target, error) {
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
