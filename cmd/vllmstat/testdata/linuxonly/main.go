// Command linuxonly builds for Linux only: macOS's syscall.SysProcAttr has no Pdeathsig.
package main

import (
	"os/exec"
	"syscall"
)

func main() {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	_ = cmd.Run()
}
