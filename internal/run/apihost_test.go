package run

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// TestAPIHostFollowsListen: without a token, an API on loopback answers only requests that name
// it as localhost or a loopback address (421 for another name, as a DNS-rebinding page sends);
// one on a network address (allow_insecure_listen) answers the name its callers reach it by.
func TestAPIHostFollowsListen(t *testing.T) {
	for _, tt := range []struct {
		listen string
		code   int
	}{
		{"127.0.0.1:0", http.StatusMisdirectedRequest},
		{"0.0.0.0:0", http.StatusOK},
	} {
		cfg := testConfig(t, t.TempDir())
		cfg.Listen, cfg.AllowInsecureListen = tt.listen, true
		p := New(cfg, Options{})
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(p.Addr())
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/v1/live", nil)
		req.Host = "gpu-node-1:" + port
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.code {
			t.Errorf("listen %s, Host %s: %d, want %d", tt.listen, req.Host, resp.StatusCode, tt.code)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
