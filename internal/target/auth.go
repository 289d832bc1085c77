package target

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

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

// FromFile reports that a's secret is read from a file: Apply must then run on every scrape.
func (a *Auth) FromFile() bool {
	return a.Basic != nil && a.Basic.PasswordFile != "" || a.Authorization != nil && a.Authorization.CredentialsFile != ""
}

// Apply sets the request's credentials, reading a credentials file now (an error wraps
// ErrCredentials). They go in the Authorization header (never in the URL), which net/http
// drops when a redirect leads to another host.
func (a *Auth) Apply(req *http.Request) error {
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
