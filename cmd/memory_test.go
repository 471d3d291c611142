package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
)

func TestContainerMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	v2 := write("memory.max", "268435456\n")
	v2None := write("memory.max.none", "max\n")
	v1 := write("memory.limit_in_bytes", "134217728\n")
	v1None := write("memory.limit_in_bytes.none", "9223372036854771712\n")
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name  string
		files []string
		want  int64
	}{
		{"cgroup v2", []string{v2, v1}, 256 << 20},
		{"cgroup v2 without a limit", []string{v2None, v1}, 0},
		{"cgroup v1", []string{missing, v1}, 128 << 20},
		{"cgroup v1 without a limit", []string{missing, v1None}, 0},
		{"no cgroup", []string{missing}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := containerMemoryLimit(tt.files)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	limit := filepath.Join(t.TempDir(), "memory.max")
	if err := os.WriteFile(limit, []byte("268435456\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("GOMEMLIMIT wins", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "off")
		debug.SetMemoryLimit(math.MaxInt64)
		assert.Zero(t, setMemoryLimit(logr.Discard(), []string{limit}))
		assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
	})
	t.Run("from the container's limit", func(t *testing.T) {
		unsetenv(t, "GOMEMLIMIT")
		debug.SetMemoryLimit(math.MaxInt64)
		want := int64(256<<20) / 100 * memoryLimitPercent
		assert.Equal(t, want, setMemoryLimit(logr.Discard(), []string{limit}))
		assert.Equal(t, want, debug.SetMemoryLimit(-1))
	})
	t.Run("no limit, none set", func(t *testing.T) {
		unsetenv(t, "GOMEMLIMIT")
		debug.SetMemoryLimit(math.MaxInt64)
		assert.Zero(t, setMemoryLimit(logr.Discard(), []string{filepath.Join(t.TempDir(), "missing")}))
		assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
	})
}

// unsetenv unsets an environment variable for the test, and restores it
// after.
func unsetenv(t *testing.T, name string) {
	t.Setenv(name, "")
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Run("GOGC wins", func(t *testing.T) {
		t.Setenv("GOGC", "100")
		debug.SetGCPercent(100)
		setGCPercent(logr.Discard())
		assert.Equal(t, 100, debug.SetGCPercent(100))
	})
	t.Run("the default", func(t *testing.T) {
		unsetenv(t, "GOGC")
		debug.SetGCPercent(100)
		setGCPercent(logr.Discard())
		assert.Equal(t, defaultGCPercent, debug.SetGCPercent(100))
	})
}
