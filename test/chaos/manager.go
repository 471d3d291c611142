package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// buildManager builds the manager binary from ./cmd into dir.
func buildManager(dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd")
	cmd.Dir = envtestenv.RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the manager: %w", err)
	}
	return bin, nil
}

// writeKubeconfig writes a kubeconfig for envtest's API server, which the
// manager reads through $KUBECONFIG.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Username: cfg.Username, Password: cfg.Password,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// managerProcess is the manager binary running as a process of its own,
// killed and restarted by the run. Every start appends to one log file.
type managerProcess struct {
	bin        string
	args       []string
	kubeconfig string
	logPath    string

	cmd    *exec.Cmd
	exited chan struct{}
	starts int
	kills  int
}

func (m *managerProcess) start() error {
	logFile, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	m.starts++
	fmt.Fprintf(logFile, "===== chaos: manager start #%d at %s: %s %s\n", m.starts,
		time.Now().Format(time.RFC3339Nano), m.bin, strings.Join(m.args, " "))
	cmd := exec.Command(m.bin, m.args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.kubeconfig)
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

// running says whether the manager process is alive.
func (m *managerProcess) running() bool {
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

// kill SIGKILLs the manager and waits for it to be gone.
func (m *managerProcess) kill() {
	if !m.running() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
	m.kills++
	m.note("manager SIGKILLed")
}

// stop asks the manager to shut down, and kills it if it takes too long.
func (m *managerProcess) stop() {
	if !m.running() {
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

// note appends a line of the harness's own to the manager's log, so that
// kills and phases show where they happened.
func (m *managerProcess) note(format string, args ...any) {
	f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "===== chaos: %s: %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// tail returns the last n lines of the manager's log.
func (m *managerProcess) tail(n int) string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
