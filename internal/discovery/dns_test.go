package discovery

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/vllmstat/vllmstat/internal/discovery/dnstest"
	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/target"
)

func TestParseDNS(t *testing.T) {
	tests := []struct {
		raw, url, host, port, path string
		srv, basic                 bool
		errHas                     string
	}{
		{raw: "dns+http://fleet.example:8000/metrics", url: "dns+http://fleet.example:8000/metrics", host: "fleet.example", port: "8000", path: "/metrics"},
		{raw: "DNS+HTTPS://Fleet.example:8443", url: "dns+https://Fleet.example:8443/metrics", host: "Fleet.example", port: "8443", path: "/metrics"},
		{raw: "dns+http://u:p@fleet.example:8000/m?x=1", url: "dns+http://fleet.example:8000/m?x=1", host: "fleet.example", port: "8000", path: "/m?x=1", basic: true},
		{raw: "dnssrv+http://_vllm._tcp.fleet.example/metrics", url: "dnssrv+http://_vllm._tcp.fleet.example/metrics", host: "_vllm._tcp.fleet.example", path: "/metrics", srv: true},
		{raw: "dns+http://fleet.example/metrics", errHas: "needs a port"},
		{raw: "dnssrv+http://_vllm._tcp.fleet.example:80/metrics", errHas: "has no port"},
		{raw: "dns+ftp://fleet.example:21", errHas: `scheme "ftp"`},
		{raw: "dns+http://fleet.example:99999", errHas: "1 to 65535"},
		{raw: "dns+http://:8000", errHas: "no name"},
		{raw: "dnssrvnoa+http://x", errHas: "want dns+http"},
		{raw: "dns+http://u:s3cret@fleet example:80", errHas: "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			d, err := ParseDNS(tt.raw)
			if tt.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("err %v, want one with %q and no secret", err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.URL != tt.url || d.Host != tt.host || d.Port != tt.port || d.Path != tt.path || d.SRV != tt.srv || (d.Auth.Basic != nil) != tt.basic {
				t.Fatalf("got %+v", d)
			}
			if d.Source() != "dns:"+tt.url {
				t.Fatalf("source %q", d.Source())
			}
		})
	}
}

func newLog() (*slog.Logger, *syncbuf.Buffer) {
	lb := &syncbuf.Buffer{}
	return slog.New(slog.NewTextHandler(lb, nil)), lb
}

func urls(ts []target.Target) string {
	var out []string
	for _, t := range ts {
		out = append(out, t.URL)
	}
	return strings.Join(out, " ")
}

func newDNSSource(t *testing.T, raw, server string, log *slog.Logger) *dnsSource {
	t.Helper()
	d, err := ParseDNS(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &dnsSource{name: d, res: NewResolver(server), timeout: lookupTimeout, log: log}
}

// refreshOnce refreshes s and returns its update: changed is false when there was none.
func refreshOnce(t *testing.T, s *dnsSource) (ts []target.Target, changed bool) {
	t.Helper()
	ups := s.refresh(context.Background())
	switch len(ups) {
	case 0:
		return nil, false
	case 1:
		if ups[0].source != s.name.Source() {
			t.Fatalf("update of source %q, want %q", ups[0].source, s.name.Source())
		}
		return ups[0].targets, true
	}
	t.Fatalf("%d updates from one DNS name", len(ups))
	return nil, false
}

// TestDNSAddresses resolves a dns+ name against a DNS server whose answers change: every A and
// AAAA record is a target at the port, IPv6 in brackets, with the name's credentials; an
// unchanged answer is no update; an address goes once two answers in a row lack it; a name
// with no addresses or none at all has no targets; a failing server keeps the last targets and
// is logged once, and its recovery once.
func TestDNSAddresses(t *testing.T) {
	srv := dnstest.New(t)
	log, lb := newLog()
	s := newDNSSource(t, "dns+http://scraper:pw@fleet.vllmstat.test.:8000/metrics", srv.Addr, log)
	const name = "fleet.vllmstat.test"
	srv.SetIPs(name, "10.0.0.2", "10.0.0.1", "fd00::1")
	ts, changed := refreshOnce(t, s)
	if want := "http://10.0.0.1:8000/metrics http://10.0.0.2:8000/metrics http://[fd00::1]:8000/metrics"; !changed || urls(ts) != want {
		t.Fatalf("first answer: %q (changed %v), want %q", urls(ts), changed, want)
	}
	for _, tg := range ts {
		if tg.Auth.Basic == nil || tg.Auth.Basic.Username.Reveal() != "scraper" {
			t.Fatalf("target %s has credentials %v, want the name's", tg.URL, tg.Auth)
		}
	}
	if _, changed := refreshOnce(t, s); changed {
		t.Fatal("the same answer gave an update")
	}
	srv.SetIPs(name, "10.0.0.2")
	if _, changed := refreshOnce(t, s); changed {
		t.Fatal("an answer lacking addresses for the first time gave an update")
	}
	srv.SetIPs(name, "10.0.0.2", "10.0.0.1", "fd00::1")
	if _, changed := refreshOnce(t, s); changed {
		t.Fatal("the addresses back after one answer gave an update")
	}
	srv.SetIPs(name, "10.0.0.3")
	if ts, changed := refreshOnce(t, s); !changed || urls(ts) != "http://10.0.0.1:8000/metrics http://10.0.0.2:8000/metrics http://10.0.0.3:8000/metrics http://[fd00::1]:8000/metrics" {
		t.Fatalf("changed answer: %q, want the new address added and the others kept", urls(ts))
	}
	if ts, changed := refreshOnce(t, s); !changed || urls(ts) != "http://10.0.0.3:8000/metrics" {
		t.Fatalf("the same answer again: %q, want the others gone", urls(ts))
	}
	srv.Fail(name)
	for range 3 {
		if _, changed := refreshOnce(t, s); changed {
			t.Fatal("a failed lookup gave an update")
		}
	}
	if n := lb.Count("dns discovery failed"); n != 1 || !strings.Contains(lb.String(), "targets=1") || !strings.Contains(lb.String(), "on "+srv.Addr) {
		t.Fatalf("failure logged %d times, want once with the targets kept and the server asked:\n%s", n, lb)
	}
	srv.SetIPs(name, "10.0.0.3")
	if _, changed := refreshOnce(t, s); changed || lb.Count("dns discovery recovered") != 1 {
		t.Fatalf("recovery with the same answer: changed %v, log:\n%s", changed, lb)
	}
	srv.SetIPs(name)
	refreshOnce(t, s)
	if ts, changed := refreshOnce(t, s); !changed || len(ts) != 0 {
		t.Fatalf("a name without addresses: %q (changed %v), want no targets", urls(ts), changed)
	}
	srv.SetIPs(name, "10.0.0.4")
	refreshOnce(t, s)
	srv.Remove(name)
	refreshOnce(t, s)
	if ts, changed := refreshOnce(t, s); !changed || len(ts) != 0 {
		t.Fatalf("a name that does not exist: %q (changed %v), want no targets", urls(ts), changed)
	}
	if lb.Count("dns discovery failed") != 1 {
		t.Fatalf("a name without records was logged as a failure:\n%s", lb)
	}
	if strings.Contains(lb.String(), "pw") {
		t.Fatalf("the log shows the password:\n%s", lb)
	}
}

// TestDNSSRV resolves a dnssrv+ name: every SRV record is a target at its host (without the
// trailing dot) and port.
func TestDNSSRV(t *testing.T) {
	srv := dnstest.New(t)
	log, _ := newLog()
	s := newDNSSource(t, "dnssrv+https://_vllm._tcp.fleet.vllmstat.test./m", srv.Addr, log)
	const name = "_vllm._tcp.fleet.vllmstat.test"
	srv.SetSRV(name, dnstest.SRV{Target: "b.vllmstat.test", Port: 8001}, dnstest.SRV{Target: "a.vllmstat.test", Port: 8000})
	ts, changed := refreshOnce(t, s)
	if want := "https://a.vllmstat.test:8000/m https://b.vllmstat.test:8001/m"; !changed || urls(ts) != want {
		t.Fatalf("SRV answer: %q, want %q", urls(ts), want)
	}
	srv.SetSRV(name, dnstest.SRV{Target: "a.vllmstat.test", Port: 8000})
	refreshOnce(t, s) // a record goes once two answers lack it
	if ts, changed := refreshOnce(t, s); !changed || urls(ts) != "https://a.vllmstat.test:8000/m" {
		t.Fatalf("changed SRV answer: %q", urls(ts))
	}
	srv.Remove(name)
	refreshOnce(t, s)
	if ts, changed := refreshOnce(t, s); !changed || len(ts) != 0 {
		t.Fatalf("no SRV records: %q, want no targets", urls(ts))
	}
}
