package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// defaultGCPercent is the garbage collector's GOGC when the environment
// sets none. Most of the manager's heap is its cache, which lives as long as
// the process; Go's default of 100 lets the heap grow to twice that before a
// collection, and the pages it grew into stay resident after. At 50 a
// collection comes at one and a half times the cache: in a burst of 3,000
// claims the peak was 9 MiB lower. The heap to mark is small (some 40 MiB at
// 10,000 claims), so the collector took about a fifth of the manager's CPU
// time in a burst, which is mostly spent waiting for the API server.
const defaultGCPercent = 50

// setGCPercent sets GOGC to defaultGCPercent unless the environment sets it.
func setGCPercent(log logr.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		log.V(1).Info("GOGC is set", "GOGC", v)
		return
	}
	debug.SetGCPercent(defaultGCPercent)
}

// memoryLimitPercent is the share of the container's memory limit the
// garbage collector aims to stay under when GOMEMLIMIT is not set: a soft
// limit, so that a burst that would take the manager over its container's
// limit makes the collector work harder instead of the kernel killing it.
// The rest is left to what the Go runtime does not count: the binary's own
// pages, which the kernel may reclaim.
const memoryLimitPercent = 90

// cgroupMemoryLimitFiles are where a container reads its own memory limit:
// cgroup v2, then v1.
var cgroupMemoryLimitFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// setMemoryLimit sets the garbage collector's soft memory limit to
// memoryLimitPercent of the container's memory limit, unless GOMEMLIMIT says
// otherwise ("off" for none) or the container has no limit. It returns the
// limit set, 0 if none.
func setMemoryLimit(log logr.Logger, files []string) int64 {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		log.V(1).Info("GOMEMLIMIT is set, the container's memory limit is not used", "GOMEMLIMIT", v)
		return 0
	}
	limit, file := containerMemoryLimit(files)
	if limit <= 0 {
		return 0
	}
	soft := limit / 100 * memoryLimitPercent
	debug.SetMemoryLimit(soft)
	log.Info("Set the garbage collector's soft memory limit from the container's memory limit (GOMEMLIMIT overrides)",
		"containerLimit", limit, "from", file, "softLimit", soft)
	return soft
}

// containerMemoryLimit returns the memory limit of the cgroup the process
// runs in, and the file that says it; 0 when there is none.
func containerMemoryLimit(files []string) (int64, string) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(data))
		if v == "max" {
			return 0, f
		}
		n, err := strconv.ParseInt(v, 10, 64)
		// cgroup v1 says "no limit" with the largest page-aligned count.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0, f
		}
		return n, f
	}
	return 0, ""
}
