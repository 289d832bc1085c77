package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// guard refuses what a web page open in a browser on the API's machine could make of the API,
// before anything else: a page of any site may send requests to 127.0.0.1, and its browser
// sends them with no credentials a program would need.
//
//   - A request with an Origin other than the API's own comes from another site's page: 403,
//     whatever it asks (the API's own report sends none, or its own; programs send none).
//   - Without a token, a request must name the API as localhost or a loopback address with the
//     port it came in on, else 421: a page that made its own DNS name point at 127.0.0.1 (DNS
//     rebinding) is then of the same origin as the API for its browser, and could read the
//     answers, but its requests still carry its name.
//
// Bodies a page can send without asking (forms, text/plain) are refused by jsonBody.
func (h *handler) guard(next http.Handler) http.Handler {
	checkHost := h.opt.Token == "" && !h.opt.AnyHost
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if checkHost {
			if port, ok := localHost(r); !ok {
				writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"error": "Host " + strconv.Quote(r.Host) +
					" does not name this API: without an api_token it answers requests for localhost or a loopback address with port " + port + " only"})
				return
			}
		}
		for _, o := range r.Header.Values("Origin") {
			if !ownOrigin(o, r.Host) {
				writeJSON(w, http.StatusForbidden, map[string]string{"error": "request from the web page of " + strconv.Quote(o) +
					" refused: the API answers programs and its own pages only"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// localHost reports that r's Host header is localhost or a loopback address with the port of
// the connection r came in on (80 when it gives none), and returns that port ("?" when r came
// in on no TCP connection, which is never its own).
func localHost(r *http.Request) (port string, ok bool) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	tcp, _ := local.(*net.TCPAddr)
	if tcp == nil {
		return "?", false
	}
	port = strconv.Itoa(tcp.Port)
	host, hport, err := net.SplitHostPort(r.Host)
	if err != nil { // no port
		host, hport = strings.TrimSuffix(strings.TrimPrefix(r.Host, "["), "]"), "80"
	}
	if hport != port {
		return port, false
	}
	if strings.EqualFold(host, "localhost") {
		return port, true
	}
	a, err := netip.ParseAddr(host)
	return port, err == nil && a.Unmap().IsLoopback()
}

// ownOrigin reports that origin, an Origin header, is the API's own: its page's scheme and the
// host the request names. Browsers write an origin's host and a Host header alike (lower case,
// without a default port); https is the API's behind a proxy that ends TLS.
func ownOrigin(origin, host string) bool {
	return host != "" && (strings.EqualFold(origin, "http://"+host) || strings.EqualFold(origin, "https://"+host))
}

// jsonBody lets through requests whose body is JSON (Content-Type application/json, with
// parameters or not), and those without a body or a type; others are 415. A web page may send a
// form or text/plain to any address without asking first; JSON it may only send where a CORS
// preflight allows, which the API never does.
func jsonBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if ct == "" && r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "Content-Type " + strconv.Quote(ct) +
				": the body must be JSON, sent with Content-Type: application/json"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
