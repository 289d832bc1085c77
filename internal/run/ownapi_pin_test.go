package run

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// interfaceAddr is an address of one of the machine's network interfaces that is not loopback,
// or "" when it has none.
func interfaceAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// TestOwnAPIOnInterfaceAddress: a run whose API listens on one of the machine's network
// addresses (allow_insecure_listen) refuses that address with the API's port as a target added
// through the API, naming the rule, as it does its loopback addresses: vllmstat would scrape
// itself. So does one listening on 0.0.0.0, which answers there too. The address with another
// port is a target like any.
func TestOwnAPIOnInterfaceAddress(t *testing.T) {
	for _, listen := range []string{"", "0.0.0.0"} {
		t.Run("listen on "+listen, func(t *testing.T) { testOwnAPIOnInterfaceAddress(t, listen) })
	}
}

// testOwnAPIOnInterfaceAddress runs the API on listen (the interface's address when empty) and
// adds the interface's address as a target.
func testOwnAPIOnInterfaceAddress(t *testing.T, listen string) {
	ip := interfaceAddr(t)
	if ip == "" {
		t.Skip("the machine has no network address but loopback")
	}
	if listen == "" {
		listen = ip
	}
	cfg := testConfig(t, t.TempDir())
	cfg.Listen, cfg.AllowInsecureListen = net.JoinHostPort(listen, "0"), true
	p := New(cfg, Options{})
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	_, port, _ := net.SplitHostPort(p.Addr())
	put := func(u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", "http://"+p.Addr()+"/v1/targets", strings.NewReader(`{"targets": ["`+u+`"]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	own := "http://" + net.JoinHostPort(ip, port) + "/metrics"
	if code, body := put(own); code != http.StatusBadRequest || !strings.Contains(body, "vllmstat's own API") {
		t.Errorf("PUT %s, the API's own address: %d %s, want 400 naming the own API", own, code, body)
	}
	other := "http://" + net.JoinHostPort(ip, "1") + "/metrics"
	if code, body := put(other); code != http.StatusOK {
		t.Errorf("PUT %s: %d %s, want 200", other, code, body)
	}
}
