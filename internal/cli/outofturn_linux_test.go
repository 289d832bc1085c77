package cli

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vllmstat/vllmstat/internal/syncbuf"
	"github.com/vllmstat/vllmstat/internal/testkit"
)

// TestRunOutOfTurnNewConnections runs "vllmstat run" against a target that speaks out of turn:
// after its first answer it sends a second one nobody asked for (a counter of 1e12), on the
// same kept connection, before the next scrape. That scrape, a step end's, finds the bytes
// there and fails; from then on the target is not trusted with a kept connection. Later its
// answers nobody asked for come just as a request does (it sends one before its answer to
// any request after the first on a connection: a server that sends them 50 ms after its
// answer does that to every request that comes within those 50 ms, as a step end's scrape
// right after a tick's does), which no check before the request can see. Every scrape after
// the first failure goes on a new connection, so none of them is answered out of turn: each
// step counts the 900 tokens the target made, never 1e12. The run says so once on stderr and
// in /v1/live.
//
// The run scrapes only at its start and at step ends (an interval of an hour, steps ended
// through the API), and the answer nobody asked for is in the client's socket (the target's
// kernel has its acknowledgement) before the step end is asked: nothing races.
func TestRunOutOfTurnNewConnections(t *testing.T) {
	var answers atomic.Int64 // asked-for answers, on every connection: the counter is 900 each
	var first, racing atomic.Bool
	send, sent, quit := make(chan struct{}), make(chan struct{}), make(chan struct{})
	tg := newRawTarget(t, func(r *rawTarget, c net.Conn, br *bufio.Reader) {
		firstConn := first.CompareAndSwap(false, true)
		for i := 0; r.next(br); i++ {
			if i > 0 && racing.Load() {
				c.Write([]byte(answer(tokensPage(1e12))))
			}
			c.Write([]byte(answer(tokensPage(900 * float64(answers.Add(1))))))
			if i == 0 && firstConn {
				select {
				case <-send:
				case <-quit:
					return
				}
				c.Write([]byte(answer(tokensPage(1e12))))
				if !testkit.Poll(10*time.Second, func() bool { return acked(c) }) {
					t.Error("the client never acknowledged the answer nobody asked for")
				}
				close(sent)
			}
		}
	})
	t.Cleanup(func() { close(quit) })
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncbuf.Buffer{}
	done := make(chan int)
	go func() {
		done <- runWith(ctx, "run", []string{"--target", tg.url(), "--interval", "3600", "--scrape-timeout", "5s", "--step-every", "0",
			"--listen", "127.0.0.1:0", "--out", dir}, &bytes.Buffer{}, stderr)
	}()
	base := apiURL(t, stderr)
	testkit.WaitFor(t, 10*time.Second, "the first scrape", func() bool {
		ts := liveTargets(t, base)
		return len(ts) == 1 && ts[0].Scrapes == 1
	})
	send <- struct{}{}
	<-sent
	if code, _, err := postEnd(base, 1); code != 200 || err != nil {
		t.Fatalf("end step 1: %d %v", code, err)
	}
	ts := liveTargets(t, base)
	if len(ts) != 1 || ts[0].Failures != 1 || !ts[0].NewConnections {
		t.Fatalf("/v1/live after the answer out of turn: %+v; want one failure, and new connections from then on", ts)
	}
	racing.Store(true)
	conns := tg.conns.Load()
	const steps = 5
	for n := 2; n <= steps; n++ {
		code, rec, err := postEnd(base, n)
		if code != 200 || err != nil {
			t.Fatalf("end step %d: %d %v", n, code, err)
		}
		if v := rec.Metrics["vllm/generation_tokens"]; v != 900 || rec.Scrapes.Failed != 0 {
			t.Errorf("step %d: %v generation tokens, %d failed scrapes; want the 900 the target made", n, v, rec.Scrapes.Failed)
		}
	}
	if n := tg.conns.Load() - conns; n != steps-1 {
		t.Errorf("%d connections for %d step ends, want a new one each", n, steps-1)
	}
	if ts := liveTargets(t, base); len(ts) != 1 || !ts[0].NewConnections || !ts[0].Up {
		t.Errorf("/v1/live: %+v; want the target up, on new connections", ts)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run exited %d\n%s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "answered out of turn"); n != 1 {
		t.Errorf("stderr says %d times that the target answered out of turn, want once\n%s", n, stderr.String())
	}
	steps1, _ := readSteps(t, filepath.Join(dir, "steps.jsonl"))
	for _, s := range steps1 {
		if v := s.Metrics["vllm/generation_tokens"]; v >= 1e11 {
			t.Errorf("step %d counts %v generation tokens: an answer nobody asked for was read", s.Step, v)
		}
	}
}

// acked reports whether everything written on c has been acknowledged by its peer: the peer's
// kernel has it, to be read.
func acked(c net.Conn) bool {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false
	}
	var n int32
	var errno syscall.Errno
	rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n)))
	})
	return errno == 0 && n == 0
}
