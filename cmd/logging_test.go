package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runMainEnv makes the test binary run the manager's main instead of the
// tests, so that a test can run the manager as a process with flags of its
// own and read what it prints.
const runMainEnv = "IPAM_BRIDGE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runManager runs the manager with args and no reachable API server (its
// kubeconfig does not exist), so it logs why it cannot start and exits.
func runManager(t *testing.T, args ...string) (stderr []byte, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "KUBECONFIG="+filepath.Join(t.TempDir(), "missing"))
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil {
		require.True(t, errors.As(err, &exit), "running the manager: %v", err)
		code = exit.ExitCode()
	}
	return errOut.Bytes(), code
}

func TestLoggingFormat(t *testing.T) {
	t.Run("json: every line is a JSON object with a message", func(t *testing.T) {
		out, code := runManager(t, "--logging-format=json")
		// 2 is refused flags; the manager gets past them and fails on the
		// missing kubeconfig.
		assert.Equal(t, 1, code, "exit code; output:\n%s", out)
		var lines int
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			lines++
			var entry map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &entry), "line %q", sc.Text())
			assert.NotEmpty(t, entry["msg"], "line %q has no msg", sc.Text())
			assert.Contains(t, entry, "ts", "line %q has no ts", sc.Text())
		}
		require.NoError(t, sc.Err())
		assert.Positive(t, lines, "the manager logged nothing")
	})
	t.Run("text stays the default", func(t *testing.T) {
		out, code := runManager(t)
		assert.Equal(t, 1, code, "exit code; output:\n%s", out)
		require.NotEmpty(t, out)
		assert.False(t, json.Valid(bytes.SplitN(out, []byte("\n"), 2)[0]), "first line is JSON: %s", out)
	})
	t.Run("an unknown format is refused", func(t *testing.T) {
		out, code := runManager(t, "--logging-format=xml")
		assert.Equal(t, 2, code, "exit code; output:\n%s", out)
		assert.Contains(t, string(out), "invalid logging flags")
	})
}
