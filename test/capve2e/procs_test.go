package capve2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// This module is pinned to CAPV's Cluster API and controller-runtime and
// imports nothing of the provider's module (see go.mod): the manager and
// the IPAM systems run as processes built from the provider's module, and
// this file starts them.

// repoRoot is the root of the provider's repository.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// moduleDir finds a dependency of this module in the module cache.
func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded; run go mod download", module)
	}
	return dir, nil
}

// goBuild builds target (a package or a file) of the provider's module
// into out, with the provider's own go.mod and versions.
func goBuild(out, target string) error {
	cmd := exec.Command("go", "build", "-o", out, target)
	cmd.Dir = repoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s from the provider's module: %w", target, err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for envtest's API server.
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

// process is a child process whose output goes to a log file. It dies with
// the test binary, whatever happens to it.
type process struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

func startProcess(cmd *exec.Cmd, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = logFile
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop asks the process to end, and kills it if it takes too long.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ipamSims is test/capve2e/ipamsim running as a process: the NetBox
// simulator (or a real NetBox, when NETBOX_URL is set) and the WAPI
// simulator, seeded and read through its control API.
type ipamSims struct {
	proc  *process
	stdin io.WriteCloser
	ep    struct {
		Control    string `json:"control"`
		NetboxURL  string `json:"netboxURL"`
		NetboxReal bool   `json:"netboxReal"`
		WAPIHost   string `json:"wapiHost"`
		WAPIPort   string `json:"wapiPort"`
		WAPICA     string `json:"wapiCA"`
	}
	client *http.Client
}

// netboxIP is an IP address record in NetBox.
type netboxIP struct {
	Address      string         `json:"address"`
	DNSName      string         `json:"dnsName"`
	Description  string         `json:"description"`
	Status       string         `json:"status"`
	CustomFields map[string]any `json:"customFields"`
}

// wapiObject is an object in the WAPI simulator.
type wapiObject struct {
	Type      string            `json:"type"`
	Name      string            `json:"name"`
	Addresses []string          `json:"addresses"`
	EAs       map[string]string `json:"eas"`
	Comment   string            `json:"comment,omitempty"`
	// MAC and MatchClient of a fixed address.
	MAC         string `json:"mac,omitempty"`
	MatchClient string `json:"matchClient,omitempty"`
}

func startIPAMSims(bin, logPath string) (*ipamSims, error) {
	s := &ipamSims{client: &http.Client{Timeout: 60 * time.Second}}
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if s.proc, err = startProcess(cmd, logPath); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		s.close()
		return nil, fmt.Errorf("ipamsim did not start: %w\n%s", err, s.proc.tail(20))
	}
	if err := json.Unmarshal(line, &s.ep); err != nil {
		s.close()
		return nil, fmt.Errorf("ipamsim: %w: %s", err, line)
	}
	return s, nil
}

func (s *ipamSims) close() {
	_ = s.stdin.Close()
	select {
	case <-s.proc.exited:
	case <-time.After(10 * time.Second):
		s.proc.stop()
	}
}

func (s *ipamSims) do(method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.ep.Control+path, r)
	if err != nil {
		return err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ipamsim %s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (s *ipamSims) addNetboxToken(token string) error {
	return s.do(http.MethodPost, "/netbox/tokens", map[string]string{"Token": token}, nil)
}

// addNetboxPrefix creates a prefix and its gateway, the first usable
// address, as a reserved IP address.
func (s *ipamSims) addNetboxPrefix(cidr string) error {
	return s.do(http.MethodPost, "/netbox/prefixes", map[string]string{"CIDR": cidr}, nil)
}

// addNetboxContainer creates a container prefix, a carving pool's parent.
func (s *ipamSims) addNetboxContainer(cidr string) error {
	return s.do(http.MethodPost, "/netbox/containers", map[string]string{"CIDR": cidr}, nil)
}

// netboxPrefix is a prefix in NetBox.
type netboxPrefix struct {
	Prefix       string         `json:"prefix"`
	Description  string         `json:"description"`
	CustomFields map[string]any `json:"customFields"`
}

// netboxPrefixesWithin lists the prefixes inside parent.
func (s *ipamSims) netboxPrefixesWithin(parent string) ([]netboxPrefix, error) {
	var out []netboxPrefix
	return out, s.do(http.MethodPost, "/netbox/prefixes-within", map[string]string{"CIDR": parent}, &out)
}

func (s *ipamSims) netboxIPAddresses() ([]netboxIP, error) {
	var out []netboxIP
	return out, s.do(http.MethodGet, "/netbox/ip-addresses", nil, &out)
}

func (s *ipamSims) addWAPIUser(name, password string) error {
	return s.do(http.MethodPost, "/wapi/users", map[string]string{"Name": name, "Password": password}, nil)
}

func (s *ipamSims) addWAPINetwork(view, cidr string) error {
	return s.do(http.MethodPost, "/wapi/networks", map[string]string{"View": view, "CIDR": cidr}, nil)
}

func (s *ipamSims) addWAPIFixedAddress(view, ip string) error {
	return s.do(http.MethodPost, "/wapi/fixedaddresses", map[string]string{"View": view, "IP": ip}, nil)
}

func (s *ipamSims) addWAPIZone(view, fqdn string) error {
	return s.do(http.MethodPost, "/wapi/zones", map[string]string{"View": view, "FQDN": fqdn}, nil)
}

func (s *ipamSims) wapiObjects(objtype string) ([]wapiObject, error) {
	var out []wapiObject
	return out, s.do(http.MethodGet, "/wapi/objects?type="+objtype, nil, &out)
}
