package scrape

import (
	"fmt"
	"net/http"
	"time"
)

// Compression is how a scrape asks the server to encode its page.
type Compression string

const (
	// CompressionGzip accepts a gzip-compressed page: fewer bytes on the wire and in the
	// server's and kernel's buffers, at the cost of inflating it here.
	CompressionGzip Compression = "gzip"
	// CompressionNone asks for the page as is (Accept-Encoding: identity).
	CompressionNone Compression = "none"
)

// The headers of every scrape.
const (
	acceptPage = "text/plain;version=0.0.4;q=0.9,*/*;q=0.1"
	userAgent  = "vllmstat"
)

// DefaultCompression is the compression of a configuration that names none.
const DefaultCompression = CompressionNone

// ParseCompression reads a compression setting: "gzip" or "none".
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressionGzip, CompressionNone:
		return c, nil
	}
	return "", fmt.Errorf("compression %q: want gzip or none", s)
}

// acceptEncoding is the Accept-Encoding header that asks for c.
func (c Compression) acceptEncoding() string {
	if c == CompressionNone {
		return "identity"
	}
	return "gzip"
}

// NewClient returns the HTTP client shared by all targets: one keep-alive connection per target
// (a fleet can be a thousand of them, all scraped every interval), none of them closed for
// being idle between two scrapes. Compression is not the transport's business: the scraper asks
// for it and inflates pages itself, with pooled decompressors.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	tr.MaxIdleConns = 0 // no global cap: one idle connection per target is the point
	// A target's scrapes never overlap, so one connection per target is enough; a second one
	// only appears when a scrape is cancelled mid-answer.
	tr.MaxIdleConnsPerHost = 2
	tr.IdleConnTimeout = 5 * time.Minute
	return &http.Client{Transport: tr}
}
