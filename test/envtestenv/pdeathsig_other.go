//go:build !linux

package envtestenv

import "os/exec"

func setParentDeathSignal(*exec.Cmd) {}
