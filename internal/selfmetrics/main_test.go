package selfmetrics

import (
	"os"
	"sync"
	"testing"

	"github.com/vllmstat/vllmstat/internal/promtest"
)

// prom is one Prometheus for the package's tests, started by the first test that needs it.
var prom struct {
	once sync.Once
	p    *promtest.Prometheus
	err  error
}

func sharedPrometheus() (*promtest.Prometheus, error) {
	prom.once.Do(func() { prom.p, prom.err = promtest.StartPrometheus() })
	return prom.p, prom.err
}

func TestMain(m *testing.M) {
	code := m.Run()
	prom.p.Close()
	os.Exit(code)
}
