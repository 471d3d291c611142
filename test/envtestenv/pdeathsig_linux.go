package envtestenv

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal kills cmd if the test binary dies without stopping
// it, so that no kube-controller-manager outlives its test run.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
