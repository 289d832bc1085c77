// Command vllmstat turns a vLLM fleet's /metrics pages into exact per-training-step metrics.
package main

import (
	"os"

	"github.com/vllmstat/vllmstat/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
