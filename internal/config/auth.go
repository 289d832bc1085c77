package config

import (
	"fmt"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/config/yamlx"
	"github.com/vllmstat/vllmstat/internal/target"
)

// credentials are the keys basic_auth and authorization, as in Prometheus' scrape configs,
// where a mapping may give them: at the top (for every target without its own) and in a
// target's mapping. resolveAuth checks them and reads their files.
type credentials struct {
	// BasicAuth is HTTP basic auth: {username: ..., password: ... or password_file: ...}.
	BasicAuth *basicAuth `yaml:"basic_auth"`
	// Authorization is an Authorization header: {type: Bearer, credentials: ... or
	// credentials_file: ...}.
	Authorization *authorization `yaml:"authorization"`
}

// basicAuth is a basic_auth mapping.
type basicAuth struct {
	// Username is the user name, a secret like the password (it is user info in a URL).
	Username target.Secret `yaml:"username"`
	// Password is the password; it is never shown.
	Password target.Secret `yaml:"password"`
	// PasswordFile holds the password instead, read at every scrape (it may be rotated).
	PasswordFile string `yaml:"password_file"`
}

func (basicAuth) YAMLExample() string { return "{username: ..., password: ... or password_file: ...}" }

// authorization is an authorization mapping.
type authorization struct {
	// Type is the scheme, one word; default Bearer.
	Type string `yaml:"type"`
	// Credentials follow the type in the header; they are never shown.
	Credentials target.Secret `yaml:"credentials"`
	// CredentialsFile holds the credentials instead, read at every scrape.
	CredentialsFile string `yaml:"credentials_file"`
}

func (authorization) YAMLExample() string {
	return "{type: Bearer, credentials: ... or credentials_file: ...}"
}

// topCredentials are the top-level basic_auth and authorization: those of a target without
// its own, with the hosts they may go to for a target added through the API.
type topCredentials struct {
	BasicAuth     *topBasicAuth     `yaml:"basic_auth"`
	Authorization *topAuthorization `yaml:"authorization"`
}

// topBasicAuth is the top-level basic_auth mapping.
type topBasicAuth struct {
	basicAuth `yaml:",inline"`
	// Hosts are where the credentials may go for a target added through the API (see Hosts).
	Hosts []string `yaml:"hosts" want:"a list of host names, IP addresses or CIDRs, e.g. [10.0.0.0/8, gpu-1.example.com]" item:"a host name, an IP address or a CIDR such as 10.0.0.0/8"`
}

func (topBasicAuth) YAMLExample() string {
	return "{username: ..., password: ... or password_file: ..., hosts: [...]}"
}

// topAuthorization is the top-level authorization mapping.
type topAuthorization struct {
	authorization `yaml:",inline"`
	// Hosts are where the credentials may go for a target added through the API (see Hosts).
	Hosts []string `yaml:"hosts" want:"a list of host names, IP addresses or CIDRs, e.g. [10.0.0.0/8, gpu-1.example.com]" item:"a host name, an IP address or a CIDR such as 10.0.0.0/8"`
}

func (topAuthorization) YAMLExample() string {
	return "{type: Bearer, credentials: ... or credentials_file: ..., hosts: [...]}"
}

// plain returns the credentials without their hosts, as a target's mapping has them.
func (t topCredentials) plain() credentials {
	var c credentials
	if t.BasicAuth != nil {
		c.BasicAuth = &t.BasicAuth.basicAuth
	}
	if t.Authorization != nil {
		c.Authorization = &t.Authorization.authorization
	}
	return c
}

// targetEntry is a target given as a mapping.
type targetEntry struct {
	// URL is the /metrics URL or host:port.
	URL         string `yaml:"url"`
	credentials `yaml:",inline"`
}

// target reads an entry of targets: a URL (or host:port), or a mapping {url: ..., basic_auth:
// ...}. A URL may carry user info; problems never quote it (Validate normalises the URLs and
// quotes them without it).
func (p *parser) target(n *yaml.Node) (target.Target, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Value == "" {
			return target.Target{}, yamlx.Problem(n, "must be a URL or host:port")
		}
		return target.Target{URL: n.Value}, nil
	case yaml.MappingNode:
		var e targetEntry
		w, es := yamlx.Decode(n, &e, yamlx.Options{Hooks: p.hooks()})
		if e.URL == "" && !w.Has("url") {
			es = append(es, yamlx.Problem(n, "a target mapping needs url: a URL or host:port")...)
		}
		a, aes := resolveAuth(e.credentials, w, n, "", p.dir)
		if es = append(es, aes...); len(es) > 0 {
			return target.Target{}, es
		}
		return target.Target{URL: e.URL, Auth: a}, nil
	}
	return target.Target{}, yamlx.Problem(n, "must be a URL or host:port, or a {url: ..., basic_auth: ...} mapping")
}

// resolveAuth checks the credentials decoded from mapping n (w says where its keys were) and
// reads their files once, so that a missing or empty one is reported at start; scrapes read
// them again. both is the path that names the problem of both keys given. Problems name keys,
// never values.
func resolveAuth(cr credentials, w yamlx.Where, n *yaml.Node, both, dir string) (target.Auth, yamlx.Errors) {
	var a target.Auth
	var es yamlx.Errors
	hasBasic, hasAuthz := w.Has("basic_auth"), w.Has("authorization")
	switch {
	case hasBasic && hasAuthz:
		return a, yamlx.Errors{{Path: both, Line: n.Line, Msg: "give basic_auth or authorization, not both"}}
	case hasBasic && cr.BasicAuth != nil:
		b := *cr.BasicAuth
		pw, pwf := secretOrFile(w, "basic_auth", "password", b.Password, &b.PasswordFile, dir, &es)
		if !pw && !pwf && len(es) == 0 && b.Username.Reveal() == "" {
			es = append(es, w.Problem("basic_auth", "needs a username, a password or a password_file"))
		}
		a.Basic = &target.BasicAuth{Username: b.Username, Password: b.Password, PasswordFile: b.PasswordFile}
	case hasAuthz && cr.Authorization != nil:
		z := *cr.Authorization
		switch {
		case !w.Has("authorization.type"):
			z.Type = "Bearer"
		case strings.EqualFold(z.Type, "basic"):
			es = append(es, w.Problem("authorization.type", "use basic_auth for basic authentication"))
		case z.Type == "" || strings.ContainsAny(z.Type, " \t\r\n"):
			es = append(es, w.Problem("authorization.type", "must be one word, such as Bearer"))
		}
		before := len(es)
		c, cf := secretOrFile(w, "authorization", "credentials", z.Credentials, &z.CredentialsFile, dir, &es)
		if !c && !cf && len(es) == before {
			es = append(es, w.Problem("authorization", "needs credentials or a credentials_file"))
		}
		a.Authorization = &target.Authorization{Type: z.Type, Credentials: z.Credentials, CredentialsFile: z.CredentialsFile}
	}
	return a, es
}

// secretOrFile checks key and key_file of the mapping at path: at most one, a secret not empty,
// a file that can be read (made relative to dir). It reports which were given.
func secretOrFile(w yamlx.Where, path, key string, secret target.Secret, file *string, dir string, es *yamlx.Errors) (hasSecret, hasFile bool) {
	kp, fp := path+"."+key, path+"."+key+"_file"
	hasSecret, hasFile = w.Has(kp), w.Has(fp)
	switch {
	case hasSecret && hasFile:
		*es = append(*es, w.Problem(path, fmt.Sprintf("give %s or %s_file, not both", key, key)))
	case hasSecret && secret.Reveal() == "":
		*es = append(*es, w.Problem(kp, "must be a non-empty string (its value is not shown)"))
	case hasFile && *file != "":
		if !filepath.IsAbs(*file) && dir != "" {
			*file = filepath.Join(dir, *file)
		}
		if _, err := target.ReadSecretFile(*file); err != nil {
			*es = append(*es, w.Problem(fp, err.Error()))
		}
	}
	return hasSecret, hasFile && *file != ""
}
