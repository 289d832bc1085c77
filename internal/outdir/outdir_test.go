package outdir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for a second vllmstat process: with
// OUTDIR_TEST_HOLD=dir it takes dir's lock, says so on stdout and holds it until stdin closes
// or it is killed; with OUTDIR_TEST_TRY=dir it tries once and prints the result.
func TestMain(m *testing.M) {
	if dir := os.Getenv("OUTDIR_TEST_HOLD"); dir != "" {
		l, err := Acquire(dir, Owner{PID: os.Getpid(), Start: time.Unix(1700000000, 0).UTC(), API: "127.0.0.1:9400"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		fmt.Println("held")
		bufio.NewReader(os.Stdin).ReadString('\n')
		l.Release()
		os.Exit(0)
	}
	if dir := os.Getenv("OUTDIR_TEST_TRY"); dir != "" {
		l, err := Acquire(dir, Self(time.Now()))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		l.Release()
		fmt.Println("acquired")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(t *testing.T, env string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	return cmd
}

// TestSecondProcessRefused holds the lock in a real second process, checks that this one is
// refused with the holder's pid and API address, then kills the holder with SIGKILL and takes
// the lock: the kernel released it, no stale lock remains.
func TestSecondProcessRefused(t *testing.T) {
	dir := t.TempDir()
	cmd := child(t, "OUTDIR_TEST_HOLD="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("holder said %q (%v)", line, err)
	}

	_, err = Acquire(dir, Self(time.Now()))
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v, want a LockedError", err)
	}
	if le.Owner == nil || le.Owner.PID != cmd.Process.Pid || le.Owner.API != "127.0.0.1:9400" {
		t.Fatalf("owner %+v, want pid %d and its API", le.Owner, cmd.Process.Pid)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", cmd.Process.Pid), "API http://127.0.0.1:9400", "2023-11-14T22:13:20Z", dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	l, err := Acquire(dir, Self(time.Now()))
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
}

// TestHeldByThisProcess checks the other direction: a second process is refused while this one
// holds the lock, and gets it once this one releases it.
func TestHeldByThisProcess(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, Self(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetAPI("127.0.0.1:1234"); err != nil {
		t.Fatal(err)
	}
	out, err := child(t, "OUTDIR_TEST_TRY="+dir).Output()
	if err == nil || !strings.Contains(string(out), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(string(out), "127.0.0.1:1234") {
		t.Fatalf("second process: %q (%v), want a refusal naming this process", out, err)
	}
	l.Release()
	out, err = child(t, "OUTDIR_TEST_TRY="+dir).Output()
	if err != nil || string(out) != "acquired\n" {
		t.Fatalf("after release: %q (%v)", out, err)
	}
}
