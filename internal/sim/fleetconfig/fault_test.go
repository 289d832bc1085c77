package fleetconfig

import (
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	good := []struct {
		in   string
		want Fault
	}{
		{"restart@30s", Fault{FaultRestart, 30 * time.Second, 0, AllServers}},
		{"down@30s+10s", Fault{FaultDown, 30 * time.Second, 10 * time.Second, AllServers}},
		{"slow@1m+5s:server=1", Fault{FaultSlow, time.Minute, 5 * time.Second, 1}},
		{"garbage@0s:server=0", Fault{FaultGarbage, 0, 0, 0}},
		{"restart@1h30m:server=12", Fault{FaultRestart, 90 * time.Minute, 0, 12}},
	}
	for _, tt := range good {
		got, err := ParseFault(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseFault(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		if again, err := ParseFault(got.String()); err != nil || again != got {
			t.Errorf("%q does not survive String: %q", tt.in, got.String())
		}
	}
	bad := []struct{ in, want string }{
		{"restart", "want KIND@TIME"},
		{"reboot@1s", `unknown kind "reboot"`},
		{"restart@soon", `time "soon" is not a non-negative duration`},
		{"restart@-1s", "not a non-negative duration"},
		{"down@1s", "down needs a duration"},
		{"slow@1s+0s", "not a positive duration"},
		{"restart@1s+5s", "restart takes no duration"},
		{"garbage@1s:host=1", "not server=N"},
		{"garbage@1s:server=-1", "not server=N"},
	}
	for _, tt := range bad {
		if _, err := ParseFault(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFault(%q) error %v, want one containing %q", tt.in, err, tt.want)
		}
	}
}
