// Package managerproc runs the manager binary, built from ./cmd, as a
// process of its own against envtest's API server, so that harnesses can
// kill and restart it and read its own memory and metrics.
package managerproc

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// Build builds the manager binary from ./cmd into dir.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd")
	cmd.Dir = envtestenv.RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the manager: %w", err)
	}
	return bin, nil
}

// FreeAddr returns a loopback address with a port that is free now, for
// the manager's endpoints.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WriteKubeconfig writes a kubeconfig for envtest's API server, which the
// manager reads through $KUBECONFIG.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	return envtestenv.WriteKubeconfig(cfg, path)
}

// Process is the manager binary running as a process of its own, killed
// and restarted by the harness. Every start appends to one log file.
type Process struct {
	Bin        string
	Args       []string
	Kubeconfig string
	LogPath    string

	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	kills  int
}

// Start starts the manager.
func (m *Process) Start() error {
	logFile, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	m.starts++
	fmt.Fprintf(logFile, "===== manager start #%d at %s: %s %s\n", m.starts,
		time.Now().Format(time.RFC3339Nano), m.Bin, strings.Join(m.Args, " "))
	cmd := exec.Command(m.Bin, m.Args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The manager dies with the harness, whatever happens to the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting the manager: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited
	return nil
}

// Running says whether the manager process is alive.
func (m *Process) Running() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Kill SIGKILLs the manager and waits for it to be gone.
func (m *Process) Kill() {
	if !m.Running() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
	m.kills++
	m.Note("manager SIGKILLed")
}

// Stop asks the manager to shut down, and kills it if it takes too long.
func (m *Process) Stop() {
	if !m.Running() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(45 * time.Second):
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
		<-m.exited
	}
}

// Note appends a line of the harness's own to the manager's log, so that
// kills and phases show where they happened.
func (m *Process) Note(format string, args ...any) {
	f, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "===== harness: %s: %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// Tail returns the last n lines of the manager's log.
func (m *Process) Tail(n int) string {
	data, err := os.ReadFile(m.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Kills counts the SIGKILLs so far.
func (m *Process) Kills() int { return m.kills }

// Pid is the process id of the running manager, 0 when none runs.
func (m *Process) Pid() int {
	if !m.Running() {
		return 0
	}
	return m.cmd.Process.Pid
}
