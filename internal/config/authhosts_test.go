package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/target"
)

func TestAuthHosts(t *testing.T) {
	c, err := Load("testdata/authhosts.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.AuthHosts.String(), "[10.1.0.0/16, fd00::/64, 10.2.0.7, fd00:1::5, gpu-1.example.com]"; got != want {
		t.Errorf("hosts %s, want %s", got, want)
	}
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"http://10.1.2.3:8000/metrics", true},
		{"http://10.1.255.255/metrics", true},
		{"http://10.0.0.1:8000/metrics", false},
		{"http://10.2.0.7/metrics", true},
		{"http://10.2.0.8/metrics", false},
		{"http://[fd00::12]:8000/metrics", true},
		{"http://[fd00:1::5]/metrics", true},
		{"http://[fd00:1::6]/metrics", false},
		{"http://[::ffff:10.1.0.1]/metrics", true}, // an IPv4-mapped address is its IPv4 one
		{"http://[fe80::1%25eth0]/metrics", false},
		{"http://GPU-1.example.com:8000/metrics", true},
		{"http://gpu-1.example.com./metrics", true},
		{"http://gpu-2.example.com/metrics", false},
		{"http://example.com/metrics", false},
		{"http://gpu-1.example.com.evil.test/metrics", false},
		{"http://10.1.0.1.nip.io/metrics", false}, // a name is never taken for an address
		{"http://localhost/metrics", false},
		{"::not a url", false},
	} {
		if got := c.AuthHosts.Match(tt.url); got != tt.want {
			t.Errorf("Match(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
	if !(Hosts{}).IsZero() || (Hosts{}).Match("http://10.1.0.1/metrics") {
		t.Error("the zero Hosts lists something")
	}
}

func TestBadAuthHosts(t *testing.T) {
	_, err := Load("testdata/authhosts.bad.yaml")
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"targets[0].authorization.hosts (line 3): unknown key; the keys here are type, credentials, credentials_file",
		"targets[1].basic_auth.hosts (line 5): unknown key; the keys here are username, password, password_file",
		`authorization.hosts[0] (line 9): "" is not allowed: must be a host name, an IP address or a CIDR such as 10.0.0.0/8`,
		`authorization.hosts[1] (line 10): "http://gpu-1.example.com:8000/metrics" is not allowed: a URL; give the host alone`,
		`authorization.hosts[2] (line 11): "*.example.com" is not allowed: wildcards are not supported; list the host names`,
		`authorization.hosts[3] (line 12): "10.0.0.1/8" is not allowed: bits are set past the prefix length; did you mean 10.0.0.0/8?`,
		`authorization.hosts[4] (line 13): "10.0.0.0/33" is not allowed: not a CIDR such as 10.0.0.0/8 or fd00::/64`,
		`authorization.hosts[5] (line 14): "gpu-1.example.com:8000" is not allowed: give the host without a port, e.g. gpu-1.example.com`,
		`authorization.hosts[6] (line 15): "[fd00::1]" is not allowed: give an IPv6 address without brackets or port`,
		`authorization.hosts[7] (line 16): "fe80::1%eth0" is not allowed: an IPv6 zone (%eth0) is not allowed; give the address alone`,
		`authorization.hosts[8] (line 17): "::ffff:10.0.0.1" is not allowed: an IPv4-mapped IPv6 address; give it as IPv4: 10.0.0.1`,
		`authorization.hosts[9] (line 18): "gpu_1.example.com" is not allowed: not a host name, an IP address or a CIDR`,
		`authorization.hosts[10] (line 19): "10.0.0.256" is not allowed: not a host name`,
		`authorization.hosts[12] (line 21): "gpu-1.example.com." is listed twice (first at line 20)`,
		`authorization.hosts[13] (line 22): must be a host name, an IP address or a CIDR such as 10.0.0.0/8`,
		`authorization.hosts[14] (line 23): " gpu-2" is not allowed: a host has no spaces`,
		`authorization.hosts[15] (line 24): "-gpu.example.com" is not allowed: not a host name`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "hosts[11]") {
		t.Errorf("a good entry is reported:\n%s", msg)
	}
	if strings.Contains(msg, "x7") {
		t.Errorf("the error shows a secret:\n%s", msg)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"authorization: {credentials: t, hosts: []}", "authorization.hosts (line 1): is empty: list the hosts or CIDRs the credentials may be sent to, or leave hosts out"},
		{"authorization: {credentials: t, hosts: 10.0.0.0/8}", "authorization.hosts (line 1): must be a list of host names, IP addresses or CIDRs"},
		{"vllmstat:\n  basic_auth: {username: u, password: p, hosts: [10.0.0.1/8]}", `vllmstat.basic_auth.hosts[0] (line 2): "10.0.0.1/8" is not allowed: bits are set past`},
		{"basic_auth: {username: u, password: p, hots: [10.0.0.0/8]}", "basic_auth.hots (line 1): unknown key; the keys here are username, password, password_file, hosts; did you mean hosts?"},
	} {
		_, err := Parse([]byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.yaml, err, tt.want)
		}
	}
}

// TestAPIAuth checks what a target added through the API without credentials is sent: a config
// target's URL its own credentials; another the top-level ones only where its host is listed,
// or, without hosts, where the API requires a token.
func TestAPIAuth(t *testing.T) {
	const own, stranger, listed = "http://10.9.0.1/metrics", "http://10.3.0.1/metrics", "http://10.1.0.1/metrics"
	for _, tt := range []struct {
		name         string
		token, hosts bool
		want         map[string]string // URL -> target.Auth.String() of what it gets, "" for none
		withheld     []string          // the URLs whose top-level credentials are withheld
	}{
		{name: "no token, no hosts", want: map[string]string{own: "basic_auth", stranger: "", listed: ""}, withheld: []string{stranger, listed}},
		{name: "token", token: true, want: map[string]string{own: "basic_auth", stranger: "authorization", listed: "authorization"}},
		{name: "hosts", hosts: true, want: map[string]string{own: "basic_auth", stranger: "", listed: "authorization"}, withheld: []string{stranger}},
		{name: "token and hosts", token: true, hosts: true, want: map[string]string{own: "basic_auth", stranger: "", listed: "authorization"}, withheld: []string{stranger}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load("testdata/authhosts.good.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			if tt.token {
				c.APIToken = target.NewSecret("api-x7")
			}
			if !tt.hosts {
				c.AuthHosts = Hosts{}
			}
			rule := c.APIAuth()
			if a, withheld := rule("http://10.0.0.1:8000/metrics"); a.Authorization == nil || withheld {
				t.Errorf("the config's target without credentials of its own: %v %v, want the top-level ones", a, withheld)
			}
			for url, want := range tt.want {
				a, withheld := rule(url)
				if got := a.String(); (want == "") != a.IsZero() || want != "" && !strings.Contains(got, want) {
					t.Errorf("%s: %s, want %q", url, got, want)
				}
				if withheld != slices.Contains(tt.withheld, url) {
					t.Errorf("%s: withheld %v", url, withheld)
				}
			}
		})
	}
	// Without top-level credentials there is nothing to give or withhold.
	c := Default()
	c.Targets = TargetsOf([]string{"h:1"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if a, withheld := c.APIAuth()(stranger); !a.IsZero() || withheld {
		t.Errorf("no top-level credentials: %v %v", a, withheld)
	}
}
