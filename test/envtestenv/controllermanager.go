package envtestenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerManagerControllers are the controllers a test control plane's
// kube-controller-manager runs: the garbage collector, which deletes the
// dependents of a deleted owner, and the namespace controller, which empties
// and finalizes a deleted namespace. The service account token controller
// and every other one stay off.
const ControllerManagerControllers = "garbage-collector-controller,namespace-controller"

// ControllerManager is a kube-controller-manager started against an envtest
// API server by StartControllerManager.
type ControllerManager struct {
	// StartedIn is how long it took from starting the process until both
	// controllers had done their first piece of work.
	StartedIn time.Duration

	cmd  *exec.Cmd
	dir  string
	logs *syncBuffer
	done chan struct{}
	err  error
}

// StartWithControllerManager is Start followed by StartControllerManager:
// a control plane whose deleted owners lose their dependents and whose
// deleted namespaces go, as in a real cluster. Suites that need neither use
// Start, which is faster. Stop the returned ControllerManager before env.
func StartWithControllerManager(extraCRDPaths ...string) (*envtest.Environment, *rest.Config, *ControllerManager, error) {
	env, cfg, err := Start(extraCRDPaths...)
	if err != nil {
		return nil, nil, nil, err
	}
	kcm, err := StartControllerManager(context.Background(), cfg)
	if err != nil {
		_ = env.Stop()
		return nil, nil, nil, err
	}
	return env, cfg, kcm, nil
}

// StartControllerManager starts KUBEBUILDER_ASSETS/kube-controller-manager
// (hack/envtest-binaries.sh builds it) against the API server cfg reaches,
// with cfg's credentials (envtest's are an administrator's), and returns
// once its garbage collector has deleted an orphaned dependent and its
// namespace controller has finalized a namespace.
//
// It runs only ControllerManagerControllers, without leader election, with
// its own credentials for every controller and no serving port. It needs no
// service account key: only the token controller, which stays off, signs
// tokens.
func StartControllerManager(ctx context.Context, cfg *rest.Config) (*ControllerManager, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run through make test, or export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh)")
	}
	binary := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%s: %w (run hack/envtest-binaries.sh, which adds it to an existing cache)", binary, err)
	}
	dir, err := os.MkdirTemp("", "envtest-kcm-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, kubeconfig); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + ControllerManagerControllers,
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		// No serving: nothing needs its healthz or metrics, and it then needs
		// no delegated authentication or authorization.
		"--secure-port=0",
		// Tests delete in bursts; the defaults (20, 30) would throttle the
		// garbage collector and the namespace controller.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--concurrent-gc-syncs=20",
		"--concurrent-namespace-syncs=10",
		"--v=1",
	}
	m := &ControllerManager{dir: dir, logs: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command(binary, args...)
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	setParentDeathSignal(m.cmd)
	start := time.Now()
	if err := m.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		m.err = m.cmd.Wait()
		close(m.done)
	}()
	if err := m.waitWorking(ctx, cfg); err != nil {
		_ = m.Stop()
		return nil, fmt.Errorf("kube-controller-manager did not come up: %w\n%s", err, m.Logs())
	}
	m.StartedIn = time.Since(start)
	return m, nil
}

// waitWorking proves both controllers work: a ConfigMap whose owner is gone
// is garbage collected, and a deleted namespace is finalized.
func (m *ControllerManager) waitWorking(ctx context.Context, cfg *rest.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	suffix := rand.String(6)
	owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kcm-probe-owner-" + suffix}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	dependent, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "kcm-probe-dependent-" + suffix,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "kcm-probe-" + suffix}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	gone := func(get func() error) bool { return apierrors.IsNotFound(get()) }
	for {
		dependentGone := gone(func() error {
			_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, dependent.Name, metav1.GetOptions{})
			return err
		})
		nsGone := gone(func() error {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
			return err
		})
		if dependentGone && nsGone {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("exited: %v", m.err)
		case <-ctx.Done():
			return fmt.Errorf("garbage collected: %t, namespace finalized: %t: %w", dependentGone, nsGone, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Logs returns what kube-controller-manager has written so far.
func (m *ControllerManager) Logs() string { return m.logs.String() }

// Stop ends kube-controller-manager, before the API server is stopped.
func (m *ControllerManager) Stop() error {
	if m == nil || m.cmd == nil {
		return nil
	}
	defer func() { _ = os.RemoveAll(m.dir) }()
	select {
	case <-m.done:
		return nil
	default:
	}
	_ = m.cmd.Process.Signal(os.Interrupt)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	return nil
}

// WriteKubeconfig writes cfg, with its client certificate, token or basic
// credentials, as a kubeconfig file for a process of its own.
func WriteKubeconfig(cfg *rest.Config, path string) error {
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

// syncBuffer is a bytes.Buffer that a process's output and a test's
// failure report may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var _ io.Writer = (*syncBuffer)(nil)

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
