package scrape

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// bufs recycles page buffers: a fleet's pages arrive at up to hundreds of MB/s, and reading
// each into a fresh, repeatedly grown slice was most of the collector's garbage.
var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf is the largest buffer kept for reuse: an oversized page's is not worth keeping.
const maxPooledBuf = 4 << 20

// pageReader reads one page at a time. Its gzip reader holds about 40 KB of tables and window;
// making one per scrape was a large part of the scraper's garbage, so page readers are pooled
// and the gzip reader Reset for every page.
type pageReader struct {
	zr  gzip.Reader
	in  io.LimitedReader // the bytes as sent, bounded
	out io.LimitedReader // the inflated bytes, bounded: a small bomb must not inflate past the limit
}

var pageReaders = sync.Pool{New: func() any { return new(pageReader) }}

// readBody reads resp's page into buf, inflated, and fails with ErrBodyTooLarge when it holds
// more than maxBody bytes before or after inflating.
func readBody(resp *http.Response, maxBody int64, buf *bytes.Buffer) error {
	gz, err := pageEncoding(resp.Header.Get("Content-Encoding"))
	switch {
	case err != nil:
		return err
	case gz:
		return inflate(resp.Body, maxBody, buf)
	}
	if resp.ContentLength > 0 && resp.ContentLength <= maxBody {
		buf.Grow(int(resp.ContentLength) + 1)
	}
	f := pageReaders.Get().(*pageReader)
	defer pageReaders.Put(f)
	f.in = io.LimitedReader{R: resp.Body, N: maxBody + 1}
	_, err = buf.ReadFrom(&f.in)
	f.in.R = nil
	if err != nil {
		return err
	}
	if int64(buf.Len()) > maxBody {
		return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	}
	return nil
}

// inflate reads the gzip stream body into buf.
func inflate(body io.Reader, maxBody int64, buf *bytes.Buffer) error {
	f := pageReaders.Get().(*pageReader)
	defer func() {
		f.in.R, f.out.R = nil, nil // keep no connection alive through the pool
		pageReaders.Put(f)
	}()
	f.in = io.LimitedReader{R: body, N: maxBody + 1}
	if err := f.zr.Reset(&f.in); err != nil {
		return inflateErr(f, maxBody, err)
	}
	f.out = io.LimitedReader{R: &f.zr, N: maxBody + 1}
	if _, err := buf.ReadFrom(&f.out); err != nil {
		return inflateErr(f, maxBody, err)
	}
	if int64(buf.Len()) > maxBody || f.in.N <= 0 {
		return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	}
	return nil
}

func inflateErr(f *pageReader, maxBody int64, err error) error {
	if f.in.N <= 0 { // the compressed page alone is over the limit; the stream was cut there
		return fmt.Errorf("%w of %d bytes", ErrBodyTooLarge, maxBody)
	}
	return fmt.Errorf("inflate gzip page: %w", err)
}

// decodePage returns the page of an answer's body read whole, with its Content-Encoding: body
// itself, or inflated into buf.
func decodePage(encoding string, body []byte, maxBody int64, buf *bytes.Buffer) ([]byte, error) {
	switch gz, err := pageEncoding(encoding); {
	case err != nil:
		return nil, err
	case !gz:
		return body, nil
	}
	if err := inflate(bytes.NewReader(body), maxBody, buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// pageEncoding reads a Content-Encoding: gzip or none; anything else is an error.
func pageEncoding(enc string) (gzip bool, err error) {
	enc = strings.TrimSpace(enc)
	switch {
	case enc == "" || strings.EqualFold(enc, "identity"):
		return false, nil
	case strings.EqualFold(enc, "gzip") || strings.EqualFold(enc, "x-gzip"):
		return true, nil
	}
	if slices.Contains(knownEncodings, strings.ToLower(enc)) {
		return false, fmt.Errorf("unsupported Content-Encoding %q: vllmstat reads gzip or identity", strings.ToLower(enc))
	}
	// Any other value is not named: it is the target's bytes, and may be anything.
	return false, fmt.Errorf("unsupported Content-Encoding of %d bytes: vllmstat reads gzip or identity", len(enc))
}

// knownEncodings are the registered content codings vllmstat does not read, named in errors.
var knownEncodings = []string{"br", "compress", "deflate", "x-compress", "zstd", "dcb", "dcz", "aes128gcm", "exi", "pack200-gzip"}
