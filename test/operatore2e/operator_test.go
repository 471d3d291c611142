package operatore2e

import (
	"context"
	"crypto/tls"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	configv1alpha1 "k8s.io/component-base/config/v1alpha1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	operatorv1 "sigs.k8s.io/cluster-api-operator/api/v1alpha2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

const (
	releaseVersion = "v0.1.0"
	// targetNS is where the IPAMProvider lives, so where the operator
	// installs the components.
	targetNS = components.TargetNamespace
	// coreNS holds the CoreProvider, which the operator wants before any
	// other provider.
	coreNS = "capi-system"
	// watchNS is the namespace spec.manager.cacheNamespace restricts the
	// manager to.
	watchNS        = "operator-watched"
	deploymentName = "capi-ipam-bridge-controller-manager"
	serviceAccount = "capi-ipam-bridge-manager"
	metricsReader  = "capi-ipam-bridge-metrics-reader"
	leaseName      = "operator-lease"
	webhookCertDir = "/tmp/k8s-webhook-server/serving-certs"
	// crdGroup is the API group of the provider's four pool CRDs.
	crdGroup = "ipam-bridge.github.io"

	installTimeout = 2 * time.Minute
	waitTimeout    = 60 * time.Second
	poll           = 250 * time.Millisecond
)

// TestOperatorInstallsAndConfiguresTheManager hands the release to the
// cluster-api-operator's IPAMProvider reconciler through a ConfigMap, with
// every spec.manager field the manager takes set, and runs the manager
// binary with the arguments the operator wrote into the Deployment, as the
// ServiceAccount the operator installed. The manager must take every
// argument, answer its probes, lead with the lease the operator names and
// serve metrics over HTTPS to the released metrics-reader role only.
func TestOperatorInstallsAndConfiguresTheManager(t *testing.T) {
	ctx := context.Background()
	env := startEnv(t)
	cfg := env.Config
	s := operatorScheme()
	admin, err := client.New(cfg, client.Options{Scheme: s})
	require.NoError(t, err)

	// clusterctl's library, inside the operator, reads clusterctl.yaml from
	// $XDG_CONFIG_HOME: an empty one keeps this machine's out of the test.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	startOperator(t, cfg, s)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", tail(operatorLogs.String(), 80))
		}
	})

	for _, ns := range []string{targetNS, coreNS, watchNS} {
		require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}

	// The release, as `make release` writes it, in a ConfigMap the
	// IPAMProvider's fetchConfig.selector picks; the operator takes the
	// version from the label.
	root := envtestenv.RepoRoot()
	comps, err := components.Components(root, releaseVersion)
	require.NoError(t, err)
	metadata, _, err := components.Metadata(root, releaseVersion)
	require.NoError(t, err)
	releaseLabels := map[string]string{
		operatorv1.ConfigMapNameLabel: components.ProviderName,
		operatorv1.ConfigMapTypeLabel: "ipam",
	}
	configMapLabels := maps.Clone(releaseLabels)
	configMapLabels[operatorv1.ConfigMapVersionLabelName] = releaseVersion
	require.NoError(t, admin.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      components.ProviderLabel + "-" + releaseVersion,
			Namespace: targetNS,
			Labels:    configMapLabels,
		},
		Data: map[string]string{
			operatorv1.MetadataConfigMapKey:   string(metadata),
			operatorv1.ComponentsConfigMapKey: string(comps),
		},
	}))

	// The operator's preflight check holds every other provider back until
	// the CoreProvider "cluster-api" is Ready. Its reconciler would install
	// Cluster API itself, so it does not run: the CoreProvider is marked
	// Ready by hand.
	core := &operatorv1.CoreProvider{ObjectMeta: metav1.ObjectMeta{Name: "cluster-api", Namespace: coreNS}}
	require.NoError(t, admin.Create(ctx, core))
	core.Status.Conditions = []metav1.Condition{{
		Type: clusterv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now(),
	}}
	require.NoError(t, admin.Status().Update(ctx, core))

	// Loopback addresses free now for the manager's endpoints; the
	// diagnostics address serves metrics, so both metrics fields name it.
	health, diagnostics, profiler, webhook := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	_, port, err := net.SplitHostPort(webhook)
	require.NoError(t, err)
	webhookPort, err := strconv.Atoi(port)
	require.NoError(t, err)

	// spec.manager with every field of v0.29 that maps to an argument of
	// ours (internal/controller/component_customizer.go). Left out:
	// featureGates (the manager has no gates and refuses unknown ones),
	// metrics.insecureDiagnostics (only "true" is written, and metrics stay
	// on HTTPS), health.livenessEndpointName/readinessEndpointName (they
	// rewrite the probes' paths; the manager serves /healthz and /readyz),
	// and gracefulShutDown, controller.cacheSyncTimeout and
	// controller.recoverPanic, which v0.29 writes into no argument.
	provider := &operatorv1.IPAMProvider{
		ObjectMeta: metav1.ObjectMeta{Name: components.ProviderName, Namespace: targetNS},
		Spec: operatorv1.IPAMProviderSpec{ProviderSpec: operatorv1.ProviderSpec{
			Version:     releaseVersion,
			FetchConfig: &operatorv1.FetchConfiguration{Selector: &metav1.LabelSelector{MatchLabels: releaseLabels}},
			Manager: &operatorv1.ManagerSpec{
				ControllerManagerConfiguration: operatorv1.ControllerManagerConfiguration{
					SyncPeriod: &metav1.Duration{Duration: 15 * time.Minute},
					LeaderElection: &configv1alpha1.LeaderElectionConfiguration{
						LeaderElect:       ptr.To(true),
						ResourceLock:      "leases",
						ResourceNamespace: targetNS,
						ResourceName:      leaseName,
						LeaseDuration:     metav1.Duration{Duration: 20 * time.Second},
						RenewDeadline:     metav1.Duration{Duration: 15 * time.Second},
						RetryPeriod:       metav1.Duration{Duration: 3 * time.Second},
					},
					CacheNamespace: watchNS,
					Controller: &operatorv1.ControllerConfigurationSpec{
						GroupKindConcurrency: map[string]int{"IPAddressClaim": 7},
					},
					Metrics: operatorv1.ControllerMetrics{BindAddress: diagnostics, DiagnosticsAddress: diagnostics},
					Health:  operatorv1.ControllerHealth{HealthProbeBindAddress: health},
					Webhook: operatorv1.ControllerWebhook{Host: "127.0.0.1", Port: ptr.To(webhookPort), CertDir: webhookCertDir},
				},
				ProfilerAddress:         profiler,
				MaxConcurrentReconciles: 5,
				// 1 is the operator's default, which it does not write.
				Verbosity:      2,
				AdditionalArgs: map[string]string{"--audit-interval": "1h"},
			},
		}},
	}
	require.NoError(t, admin.Create(ctx, provider))
	providerKey := client.ObjectKeyFromObject(provider)

	t.Log("waiting for the operator to install the release")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := &operatorv1.IPAMProvider{}
		require.NoError(c, admin.Get(ctx, providerKey, p))
		installed := meta.FindStatusCondition(p.Status.Conditions, operatorv1.ProviderInstalledCondition)
		require.NotNil(c, installed, "no %s condition yet: %v", operatorv1.ProviderInstalledCondition, p.Status.Conditions)
		require.Equal(c, metav1.ConditionTrue, installed.Status, "%s: %s", installed.Reason, installed.Message)
		assert.Equal(c, releaseVersion, ptr.Deref(p.Status.InstalledVersion, ""))
		assert.Equal(c, "v1beta2", ptr.Deref(p.Status.Contract, ""), "the contract of metadata.yaml's release series")
	}, installTimeout, poll)

	// The four pool CRDs and ClusterSubnets', established, so the manager's
	// informers start.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		require.NoError(c, admin.List(ctx, crds))
		var established []string
		for _, crd := range crds.Items {
			if crd.Spec.Group != crdGroup {
				continue
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = append(established, crd.Name)
				}
			}
		}
		assert.ElementsMatch(c, []string{
			"netboxippools." + crdGroup, "globalnetboxippools." + crdGroup,
			"infobloxippools." + crdGroup, "globalinfobloxippools." + crdGroup,
			"clustersubnets." + crdGroup,
		}, established)
	}, waitTimeout, poll)

	deployment := &appsv1.Deployment{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: targetNS, Name: deploymentName}, deployment))
	container := managerContainer(t, deployment)
	t.Logf("arguments the operator wrote: %q", container.Args)

	// The operator wrote each field as the argument it documents; each
	// replaces the released argument of the same name or is appended.
	assert.Subset(t, container.Args, []string{
		"--health-addr=" + health,
		"--metrics-bind-addr=" + diagnostics,
		"--diagnostics-address=" + diagnostics,
		"--profiler-address=" + profiler,
		"--leader-elect=true",
		"--leader-election-id=" + targetNS + "/" + leaseName,
		"--leader-elect-lease-duration=20s",
		"--leader-elect-renew-deadline=15s",
		"--leader-elect-retry-period=3s",
		"--sync-period=900s",
		"--v=2",
		"--namespace=" + watchNS,
		"--max-concurrent-reconciles=5",
		"--ipaddressclaim-concurrency=7",
		"--webhook-host=127.0.0.1",
		"--webhook-port=" + port,
		"--webhook-cert-dir=" + webhookCertDir,
		"--audit-interval=1h",
		// Released, and left alone: metrics stay on HTTPS.
		"--insecure-diagnostics=false",
	})
	args := effectiveArgs(t, container)

	// Until the Deployment reports itself available the operator's health
	// check keeps the provider not Ready: it has found the Deployment as
	// the provider's.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := &operatorv1.IPAMProvider{}
		require.NoError(c, admin.Get(ctx, providerKey, p))
		ready := meta.FindStatusCondition(p.Status.Conditions, clusterv1.ReadyCondition)
		require.NotNil(c, ready)
		assert.Equal(c, metav1.ConditionFalse, ready.Status)
		assert.Equal(c, operatorv1.NoDeploymentAvailableConditionReason, ready.Reason)
	}, waitTimeout, poll)

	// The manager as its pod would run it: the Deployment's arguments and
	// environment, authenticated as the Deployment's ServiceAccount, whose
	// RBAC the operator installed from the release.
	require.Equal(t, serviceAccount, deployment.Spec.Template.Spec.ServiceAccountName)
	setPodEnv(t, deployment, container)
	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + targetNS + ":" + serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + targetNS, "system:authenticated"},
	}, cfg)
	require.NoError(t, err)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, managerproc.WriteKubeconfig(user.Config(), kubeconfig))
	bin, err := managerproc.Build(t.TempDir())
	require.NoError(t, err)
	mgr := &managerproc.Process{Bin: bin, Args: args, Kubeconfig: kubeconfig, LogPath: filepath.Join(dir, "manager.log")}
	require.NoError(t, mgr.Start())
	t.Cleanup(mgr.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", mgr.Tail(80))
		}
	})

	plain := &http.Client{Timeout: 5 * time.Second}
	for _, path := range []string{"/healthz", "/readyz"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.True(c, mgr.Running(), "the manager exited")
			code, body, err := managerproc.Get(ctx, plain, "http://"+health+path, "")
			require.NoError(c, err)
			assert.Equal(c, http.StatusOK, code, "%s: %s", path, body)
		}, waitTimeout, poll, "the manager answers %s on --health-addr", path)
	}

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lease := &coordinationv1.Lease{}
		require.NoError(c, admin.Get(ctx, client.ObjectKey{Namespace: targetNS, Name: leaseName}, lease))
		assert.NotEmpty(c, ptr.Deref(lease.Spec.HolderIdentity, ""))
		assert.Equal(c, int32(20), ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
	}, waitTimeout, poll, "the manager holds the lease spec.manager.leaderElection names")

	code, _, err := managerproc.Get(ctx, plain, "http://"+profiler+"/debug/pprof/", "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "the manager serves pprof on --profiler-address")

	// Metrics: a Prometheus ServiceAccount bound to the released
	// metrics-reader ClusterRole reads them; nobody reads them without a
	// token.
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: watchNS, Name: "prometheus"}}))
	require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-ipam-bridge"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: watchNS, Name: "prometheus"}},
	}))
	clientset, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	tr, err := clientset.CoreV1().ServiceAccounts(watchNS).CreateToken(ctx, "prometheus",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	secure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The manager's serving certificate is self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test against loopback
	}}
	metricsURL := "https://" + diagnostics + "/metrics"
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, err := managerproc.Get(ctx, secure, metricsURL, "")
		require.NoError(c, err)
		assert.Equal(c, http.StatusUnauthorized, code, body)
	}, waitTimeout, poll, "metrics without a token")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, err := managerproc.Get(ctx, secure, metricsURL, tr.Status.Token)
		require.NoError(c, err)
		require.Equal(c, http.StatusOK, code, body)
		assert.Contains(c, body, "controller_runtime_reconcile_total", "the manager's metrics are served")
	}, waitTimeout, poll, "metrics with the token of a ServiceAccount bound to %s", metricsReader)

	// The pod is ready now; envtest runs neither kubelet nor the deployment
	// controller, so the test writes the Deployment's Available condition
	// they would, and the operator's health check carries it to the
	// provider's Ready condition. A merge patch, because the operator
	// applies the components again after each of its status updates.
	available := deployment.DeepCopy()
	available.Status.Conditions = []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
		Message: "Deployment has minimum availability.", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	require.NoError(t, admin.Status().Patch(ctx, available, client.MergeFrom(deployment)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		p := &operatorv1.IPAMProvider{}
		require.NoError(c, admin.Get(ctx, providerKey, p))
		assert.True(c, meta.IsStatusConditionTrue(p.Status.Conditions, clusterv1.ReadyCondition), "%v", p.Status.Conditions)
	}, waitTimeout, poll, "the provider is Ready once its Deployment is available")

	assert.True(t, mgr.Running(), "the manager exited")
	assert.NotContains(t, mgr.Tail(400), "unknown flag", "arguments %q", args)
}

// managerContainer is the Deployment's "manager" container, the one the
// operator customizes.
func managerContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			return c
		}
	}
	require.Fail(t, "the Deployment has no manager container")
	return corev1.Container{}
}

// effectiveArgs are the container's arguments as the kubelet passes them.
func effectiveArgs(t *testing.T, c corev1.Container) []string {
	t.Helper()
	args, err := managerproc.ContainerArgs(c)
	assert.NoError(t, err)
	return args
}

// setPodEnv gives the manager process the container's environment as the
// kubelet would: literal values, and the pod's namespace where a variable
// comes from metadata.namespace.
func setPodEnv(t *testing.T, d *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			t.Setenv(e.Name, e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			t.Setenv(e.Name, d.Namespace)
		default:
			require.Failf(t, "unexpected environment variable", "%s comes from %v, which the test cannot supply", e.Name, e.ValueFrom)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := managerproc.FreeAddr()
	require.NoError(t, err)
	return addr
}
