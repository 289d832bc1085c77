package scrape

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vllmstat/vllmstat/internal/target"
)

// secretMark stands for a secret a target's answer holds.
const secretMark = "s3cr3t_mark_71"

// TestAnswerErrorsShowNoBytes: however an answer is malformed (its status line, its headers,
// its framing, its body), the scrape's error says what is wrong and where, never with the
// answer's bytes, with either client: fasthttp quotes up to 400 bytes of the answer, net/http a
// bad status or header line, and the page parser quoted the first token of a body that is
// not Prometheus text.
func TestAnswerErrorsShowNoBytes(t *testing.T) {
	const m = secretMark
	page := func(body string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	for _, tt := range []struct {
		name, answer, says string
	}{
		{"status line", m + " garbage\r\n\r\n", "status line"},
		{"status code", "HTTP/1.1 2x0 " + m + "\r\nContent-Length: 2\r\n\r\nm\n", "status line"},
		{"version", "HTTQ/1.1 200 OK " + m + "\r\nContent-Length: 2\r\n\r\nm\n", "status line"},
		{"header without colon", "HTTP/1.1 200 OK\r\nX-Token " + m + "\r\nContent-Length: 2\r\n\r\nm\n", "headers"},
		{"control byte in a header", "HTTP/1.1 200 OK\r\nX-T: a\x01" + m + "\r\nContent-Length: 2\r\n\r\nm\n", "headers"},
		{"content length", "HTTP/1.1 200 OK\r\nContent-Length: " + m + "\r\n\r\nm\n", "headers"},
		{"transfer encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: " + m + "\r\n\r\nm\n", "headers"},
		{"chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + m + "\r\nabc\r\n0\r\n\r\n", "chunked"},
		{"chunk end", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd" + m + "\r\n0\r\n\r\n", "chunked"},
		{"content encoding", "HTTP/1.1 200 OK\r\nContent-Encoding: " + m + "\r\nContent-Length: 2\r\n\r\nm\n", "Content-Encoding"},
		{"closed in the headers", "HTTP/1.1 200 OK\r\nX-A: " + m, "incomplete"},
		{"redirect loop", "HTTP/1.1 302 Found\r\nLocation: /metrics?" + m + "\r\nContent-Length: 0\r\n\r\n", "too many redirects"},
		{"location", "HTTP/1.1 302 Found\r\nLocation: http://[" + m + "\r\nContent-Length: 0\r\n\r\n", "Location"},
		{"text body", page(m + " is the token\n"), "line 1, column 16"},
		{"html body", page("<html><body>" + m + "</body></html>\n"), "line 1, column 1"},
		{"json body", page("{\"token\": \"" + m + "\"}\n"), "line 1, column 1"},
		{"bad line in a page", page("vllm:num_requests_running{engine=\"0\"} 3\nvllm:x " + m + "\n"), "line 2, column 8"},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					if _, err := c.Read(buf); err == nil {
						c.Write([]byte(tt.answer))
						c.(*net.TCPConn).CloseWrite()
						c.Read(buf) // until the client closes
					}
				}()
			}
		}()
		t.Run(tt.name, func(t *testing.T) {
			viaBoth(t, func(t *testing.T, fetch fetcher) {
				r := fetch(context.Background(), target.Target{URL: "http://" + l.Addr().String() + "/metrics"}, Options{Timeout: 5 * time.Second, KeepBody: true})
				err := r.Err()
				if err == nil || strings.Contains(err.Error(), m[:6]) || !strings.Contains(err.Error(), tt.says) {
					t.Errorf("error %v, want one that says %q and nothing of the answer", err, tt.says)
				}
				if r.Body != nil {
					t.Errorf("the result keeps the body of a failed scrape, for its recording")
				}
			})
		})
		l.Close()
	}
}
