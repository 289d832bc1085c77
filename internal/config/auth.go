package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vllmstat/vllmstat/internal/scrape"
)

// Keys of a credentials mapping, as in Prometheus' scrape configs.
var (
	basicAuthKeys     = []string{"username", "password", "password_file"}
	authorizationKeys = []string{"type", "credentials", "credentials_file"}
	targetKeys        = []string{"url", "basic_auth", "authorization"}
)

// targets reads a list whose entries are URLs (or host:port) or mappings
// {url: ..., basic_auth: {...}} / {url: ..., authorization: {...}}. A URL may carry user info;
// problems never quote it (Validate normalises the URLs and quotes them without it).
func (d *decoder) targets(v *yaml.Node, path string) {
	const want = "must be a list of URLs such as http://host:8000/metrics or host:port, or of {url: ..., basic_auth: ...} mappings"
	if v.Kind != yaml.SequenceNode {
		d.problem(v, path, want)
		return
	}
	ts := []scrape.Target{}
	for i, e := range v.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		switch e.Kind {
		case yaml.ScalarNode:
			if e.Tag == "!!null" || e.Value == "" {
				d.problem(e, p, "must be a URL or host:port")
				continue
			}
			ts = append(ts, scrape.Target{URL: e.Value})
		case yaml.MappingNode:
			d.unknownKeys(e, p, targetKeys)
			u := get(e, "url")
			if u == nil || u.Kind != yaml.ScalarNode || u.Tag == "!!null" || u.Value == "" {
				d.problem(e, p, "a target mapping needs url: a URL or host:port")
				continue
			}
			a, _ := d.auth(e, p+".")
			ts = append(ts, scrape.Target{URL: u.Value, Auth: a})
		default:
			d.problem(e, p, want)
		}
	}
	d.c.Targets = ts
}

// auth reads the basic_auth and authorization keys of mapping n; ok is false when n has
// neither or they are wrong.
func (d *decoder) auth(n *yaml.Node, prefix string) (a scrape.Auth, ok bool) {
	ba, az := get(n, "basic_auth"), get(n, "authorization")
	switch {
	case ba == nil && az == nil:
		return a, false
	case ba != nil && az != nil:
		at := strings.TrimSuffix(prefix, ".")
		if at == "" {
			at = "basic_auth, authorization"
		}
		d.problem(n, at, "give basic_auth or authorization, not both")
		return a, false
	case ba != nil:
		a.Basic = d.basicAuth(ba, prefix+"basic_auth")
	default:
		a.Authorization = d.authorization(az, prefix+"authorization")
	}
	return a, !a.IsZero()
}

func (d *decoder) basicAuth(n *yaml.Node, path string) *scrape.BasicAuth {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "must be a mapping {username: ..., password: ... or password_file: ...}")
		return nil
	}
	bad := len(d.ps)
	d.unknownKeys(n, path, basicAuthKeys)
	var b scrape.BasicAuth
	if v := get(n, "username"); v != nil {
		var user string
		d.str(v, path+".username", &user)
		b.Username = scrape.NewSecret(user)
	}
	before := len(d.ps)
	b.Password, b.PasswordFile = d.secretOrFile(n, path, "password")
	if len(d.ps) == before && b.Username.Reveal() == "" && b.Password.Reveal() == "" && b.PasswordFile == "" {
		d.problem(n, path, "needs a username, a password or a password_file")
	}
	if len(d.ps) > bad {
		return nil
	}
	return &b
}

func (d *decoder) authorization(n *yaml.Node, path string) *scrape.Authorization {
	if n.Kind != yaml.MappingNode {
		d.problem(n, path, "must be a mapping {type: Bearer, credentials: ... or credentials_file: ...}")
		return nil
	}
	bad := len(d.ps)
	d.unknownKeys(n, path, authorizationKeys)
	a := scrape.Authorization{Type: "Bearer"}
	if v := get(n, "type"); v != nil {
		d.str(v, path+".type", &a.Type)
		switch {
		case strings.EqualFold(a.Type, "basic"):
			d.problem(v, path+".type", "use basic_auth for basic authentication")
		case a.Type == "" || strings.ContainsAny(a.Type, " \t\r\n"):
			d.problem(v, path+".type", "must be one word, such as Bearer")
		}
	}
	before := len(d.ps)
	a.Credentials, a.CredentialsFile = d.secretOrFile(n, path, "credentials")
	if len(d.ps) == before && a.Credentials.Reveal() == "" && a.CredentialsFile == "" {
		d.problem(n, path, "needs credentials or a credentials_file")
	}
	if len(d.ps) > bad {
		return nil
	}
	return &a
}

// secretOrFile reads key or key_file of mapping n. The file is read once now, so that a missing
// or empty one is reported at start; scrapes read it again (it may be rotated). Problems name
// the key, never the value.
func (d *decoder) secretOrFile(n *yaml.Node, path, key string) (scrape.Secret, string) {
	v, f := get(n, key), get(n, key+"_file")
	if v != nil && f != nil {
		d.problem(n, path, fmt.Sprintf("give %s or %s_file, not both", key, key))
		return scrape.Secret{}, ""
	}
	if v != nil {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Value == "" {
			d.problem(v, path+"."+key, "must be a non-empty string (its value is not shown)")
			return scrape.Secret{}, ""
		}
		return scrape.NewSecret(v.Value), ""
	}
	if f == nil {
		return scrape.Secret{}, ""
	}
	var file string
	d.str(f, path+"."+key+"_file", &file)
	if file == "" {
		return scrape.Secret{}, ""
	}
	if !filepath.IsAbs(file) && d.dir != "" {
		file = filepath.Join(d.dir, file)
	}
	if _, err := scrape.ReadSecretFile(file); err != nil {
		d.problem(f, path+"."+key+"_file", err.Error())
		return scrape.Secret{}, ""
	}
	return scrape.Secret{}, file
}

// unknownKeys reports the keys of mapping n that are not in keys.
func (d *decoder) unknownKeys(n *yaml.Node, path string, keys []string) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(keys, k.Value) {
			d.problem(k, path+"."+k.Value, fmt.Sprintf("unknown key; the keys here are %s", strings.Join(keys, ", ")))
		}
	}
}
