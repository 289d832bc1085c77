package cli

import (
	"bytes"
	"io"
	"log"
)

// unsolicited starts what net/http logs, through the standard logger, of an answer that came
// on an idle connection: it quotes the answer's first bytes.
var unsolicited = []byte("Unsolicited response received on idle HTTP channel")

// quietStdLog is the standard logger's output: its lines go to w as they are, but net/http's
// line about an answer out of turn, which says so without its bytes (a target's answer may hold
// anything, its server's secrets too).
type quietStdLog struct{ w io.Writer }

func (q quietStdLog) Write(p []byte) (int, error) {
	i := bytes.Index(p, unsolicited)
	if i < 0 {
		return q.w.Write(p)
	}
	line := append(p[:i:i], "a target answered out of turn on an idle connection, which net/http closed (the answer's bytes are not shown)\n"...)
	if _, err := q.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// quietStdLogger sends the standard logger's lines to stderr, through quietStdLog.
func quietStdLogger(stderr io.Writer) { log.SetOutput(quietStdLog{stderr}) }
