// Package outdir makes an output directory the property of one run at a time. Two runs writing
// into one directory would interleave their steps.jsonl lines (1, 1, 2, 2, …) and corrupt each
// other's files, so a run takes the directory's lock before it creates anything there and
// refuses to start when another run holds it.
package outdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LockName is the lock file's name inside the output directory.
const LockName = ".vllmstat.lock"

// Owner describes the run that holds a directory; the lock file holds it as JSON so that a run
// refused the directory can say who has it.
type Owner struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host,omitempty"`
	Start time.Time `json:"start"`
	API   string    `json:"api,omitempty"` // the holder's API address, "" without one
}

// String is the owner as a refused run prints it.
func (o Owner) String() string {
	parts := []string{fmt.Sprintf("pid %d", o.PID)}
	if o.Host != "" {
		parts = append(parts, "host "+o.Host)
	}
	if !o.Start.IsZero() {
		parts = append(parts, "started "+o.Start.Format(time.RFC3339))
	}
	if o.API != "" {
		parts = append(parts, "API http://"+o.API)
	}
	return strings.Join(parts, ", ")
}

// LockedError is returned by Acquire when another run holds the directory.
type LockedError struct {
	Dir   string
	Owner *Owner // nil when the lock file could not be read (its holder is still writing it)
}

func (e *LockedError) Error() string {
	who := "another vllmstat run"
	if e.Owner != nil {
		who += " (" + e.Owner.String() + ")"
	}
	return fmt.Sprintf("output directory %q is in use by %s; stop that run or choose another out_dir", e.Dir, who)
}

// ErrLocked matches every LockedError with errors.Is.
var ErrLocked = errors.New("output directory in use")

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Lock is a held directory lock. The kernel releases it when the process ends, however it
// ends, so a killed run leaves no stale lock behind.
type Lock struct {
	f     *os.File
	path  string
	owner Owner
}

// Acquire creates dir if needed and takes its lock for owner, or returns a *LockedError naming
// the run that holds it. The lock file stays in the directory after Release: removing it would
// let a run that opened it just before the removal lock a file nobody else can see.
func Acquire(dir string, owner Owner) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %q: %w", path, err)
	}
	if !held {
		le := &LockedError{Dir: dir}
		if b, err := os.ReadFile(path); err == nil {
			var o Owner
			if json.Unmarshal(b, &o) == nil && o.PID != 0 {
				le.Owner = &o
			}
		}
		f.Close()
		return nil, le
	}
	l := &Lock{f: f, path: path, owner: owner}
	if err := l.write(); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// SetAPI records the holder's API address once it listens.
func (l *Lock) SetAPI(addr string) error {
	l.owner.API = addr
	return l.write()
}

func (l *Lock) write() error {
	b, _ := json.Marshal(l.owner)
	b = append(b, '\n')
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock file %q: %w", l.path, err)
	}
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write lock file %q: %w", l.path, err)
	}
	return nil
}

// Release gives the directory up. The file's content stays; only the lock counts.
func (l *Lock) Release() error {
	unlock(l.f)
	return l.f.Close()
}

// Self is the Owner of the calling process, started now.
func Self(now time.Time) Owner {
	host, _ := os.Hostname()
	return Owner{PID: os.Getpid(), Host: host, Start: now}
}
