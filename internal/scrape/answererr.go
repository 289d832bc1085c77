package scrape

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/valyala/fasthttp"
)

// A target's answer may hold anything, a secret its server never meant to show too, and a
// scrape's error goes to the log, the API (/v1/live) and recordings. The HTTP clients quote
// what they could not read: fasthttp up to 400 bytes of a malformed answer, its body included;
// net/http a malformed status line or header line. So every failure of a client to get an answer
// goes through quiet, which keeps the errors whose text cannot hold the answer's bytes and says
// the others in its own words: the problem, where in the answer, and how many bytes had come.

// answerError is a failure to read a target's answer, said without the answer's bytes.
type answerError struct {
	what  string // the problem and where, e.g. "malformed status line"
	n     int    // bytes of the answer read when it failed, -1 when the client does not say
	cause error  // the network's failure behind it (a timeout, an early close), nil for none
}

func (e *answerError) Error() string {
	var b strings.Builder
	b.WriteString(e.what)
	if e.n >= 0 {
		fmt.Fprintf(&b, " after %d bytes of the answer", e.n)
	}
	b.WriteString(" (the answer's bytes are not shown)")
	if e.cause != nil {
		b.WriteString(": ")
		b.WriteString(e.cause.Error())
	}
	return b.String()
}

// Unwrap gives the cause, whose text holds nothing of the answer, for errors.Is and errors.As
// (a timeout, a reset connection).
func (e *answerError) Unwrap() error { return e.cause }

// Timeout reports whether the cause is a timeout (see os.IsTimeout).
func (e *answerError) Timeout() bool {
	t, ok := e.cause.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

// bufferSize is how fasthttp says how many bytes of an answer it had read.
var bufferSize = regexp.MustCompile(`buffer size=(\d+)`)

// quiet returns err when its text holds nothing of the target's answer, and otherwise an
// answerError that says what it was.
func quiet(err error) error {
	if err == nil || clean(err) {
		return err
	}
	if ue, ok := err.(*url.Error); ok {
		return &url.Error{Op: ue.Op, URL: ue.URL, Err: quiet(ue.Err)}
	}
	e := &answerError{n: -1, cause: cleanCause(err)}
	// The library's text is only read here, to choose the words; none of it is kept.
	msg := err.Error()
	if m := bufferSize.FindStringSubmatch(msg); m != nil {
		e.n, _ = strconv.Atoi(m[1])
	}
	in := func(parts ...string) bool {
		for _, p := range parts {
			if strings.Contains(strings.ToLower(msg), p) {
				return true
			}
		}
		return false
	}
	switch {
	case in("status code", "http version", "first line of response", "malformed http response"):
		e.what = "malformed status line"
	case in("redirects"):
		e.what = "too many redirects"
	case in("missing location"):
		e.what = "a redirect without a Location header"
	case in("location header"):
		e.what = "malformed Location header in a redirect"
	case in("chunk", "hex number"):
		e.what = "malformed chunked body"
	case in("trailer"):
		e.what = "malformed trailer"
	case in("http response to https client"):
		e.what = "an HTTP answer to an HTTPS request"
	case e.cause != nil && in("header"):
		e.what = "incomplete headers"
	case in("header", "content-length", "transfer-encoding", "transfer encoding", "mime"):
		e.what = "malformed headers"
	case e.cause != nil:
		e.what = "incomplete answer"
	default:
		e.what = "malformed answer"
	}
	return e
}

// cleanCause returns the first error of err's chain that clean accepts, nil for none.
func cleanCause(err error) error {
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		if clean(e) {
			return e
		}
	}
	return nil
}

// cleanErrors are errors whose text is fixed.
var cleanErrors = []error{
	io.EOF, io.ErrUnexpectedEOF, context.Canceled, context.DeadlineExceeded, net.ErrClosed,
	fasthttp.ErrTimeout, fasthttp.ErrDialTimeout, fasthttp.ErrConnectionClosed, fasthttp.ErrNoFreeConns,
	fasthttp.ErrTLSHandshakeTimeout, fasthttp.ErrBodyTooLarge, errOutOfTurn, errPeerClosed,
}

// clean reports whether err's text holds nothing a target sent: network failures, which name
// addresses and system errors; certificates' verification, which names what a certificate
// says it is for (a certificate is public); errors of fixed text.
func clean(err error) bool {
	switch e := err.(type) {
	case *url.Error:
		return clean(e.Err)
	case *net.OpError, *net.DNSError, *net.AddrError, *os.SyscallError, syscall.Errno,
		*tls.CertificateVerificationError, tls.RecordHeaderError, tls.AlertError,
		x509.UnknownAuthorityError, x509.CertificateInvalidError, x509.HostnameError:
		return true
	}
	for _, c := range cleanErrors {
		if err == c {
			return true
		}
	}
	return false
}
