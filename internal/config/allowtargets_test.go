package config

import (
	"strings"
	"testing"
)

// TestAllowTargets reads allow_targets, the addresses where a target added through the API may
// be although the API refuses it: IP addresses and CIDRs only, every wrong entry reported with
// its line, a name among them (names are never resolved, so listing one would allow nothing).
func TestAllowTargets(t *testing.T) {
	c, err := Parse([]byte("targets: [h:1]\nallow_targets: [169.254.0.0/16, fd00:ec2::254, 127.0.0.1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range c.AllowedTargets() {
		got = append(got, p.String())
	}
	if want := "169.254.0.0/16 fd00:ec2::254/128 127.0.0.1/32"; strings.Join(got, " ") != want {
		t.Errorf("allowed %v, want %s", got, want)
	}
	if d := Default(); len(d.AllowedTargets()) != 0 {
		t.Error("the default allows addresses")
	}

	_, err = Parse([]byte(`targets: [h:1]
allow_targets:
  - 169.254.0.1/16
  - metadata.google.internal
  - ""
  - fe80::1%eth0
  - ::ffff:169.254.169.254
  - 10.0.0.0/33
  - 169.254.169.254
  - 169.254.169.254
  - {cidr: 10.0.0.0/8}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		`allow_targets[0] (line 3): "169.254.0.1/16" is not allowed: bits are set past the prefix length; did you mean 169.254.0.0/16?`,
		`allow_targets[1] (line 4): "metadata.google.internal" is not allowed: a host name; allow_targets lists IP addresses and CIDRs such as 169.254.0.0/16 (names are checked by name, never resolved)`,
		`allow_targets[2] (line 5): "" is not allowed: must be an IP address or a CIDR such as 169.254.0.0/16`,
		`allow_targets[3] (line 6): "fe80::1%eth0" is not allowed: an IPv6 zone (%eth0) is not allowed`,
		`allow_targets[4] (line 7): "::ffff:169.254.169.254" is not allowed: an IPv4-mapped IPv6 address; give it as IPv4: 169.254.169.254`,
		`allow_targets[5] (line 8): "10.0.0.0/33" is not allowed: not a CIDR`,
		`allow_targets[7] (line 10): "169.254.169.254" is listed twice (first at line 9)`,
		`allow_targets[8] (line 11): must be an IP address or a CIDR such as 169.254.0.0/16`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "allow_targets[6]") {
		t.Errorf("a good entry is reported:\n%s", msg)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"targets: [h:1]\nallow_targets: 169.254.0.0/16", "allow_targets (line 2): must be a list of IP addresses or CIDRs"},
		{"targets: [h:1]\nallow_target: [169.254.0.0/16]", "did you mean allow_targets?"},
	} {
		if _, err := Parse([]byte(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.yaml, err, tt.want)
		}
	}

	// Set other than by a file, the entries are checked by Validate.
	c = Default()
	c.Targets = TargetsOf([]string{"h:1"})
	c.AllowTargets = []string{"10.0.0.0/8", "gpu-1"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `allow_targets[1]: "gpu-1" is not allowed: a host name`) {
		t.Errorf("Validate of a name in allow_targets: %v", err)
	}
}
