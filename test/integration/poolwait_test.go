package integration

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

// A manager is killed after the IPAM system made the records of two new
// claims and before their IPAddresses were written; the pool is deleted
// while no manager runs. What the dead manager knew of those records (its
// allocations under way) died with it, and nothing in the cluster records
// them: the pool must still wait for its claims, which the next manager
// releases by their markers once they are deleted.
func TestDeletedPoolWaitsForClaimsWhoseRecordsAManagerDiedBeforeWriting(t *testing.T) {
	bin := managerBinary(t)
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "poolwait-" + f.ns
		f.seedNetwork("10.28.0.0/24")
		pool := f.createPool("pool", "10.28.0.0/24")
		// The API server refuses the IPAddresses, so the manager has made
		// the records and can write nothing of them when it is killed.
		allow := refuseIPAddresses(t, f)
		mgr := startManagerProcess(t, bin, f.filter)
		claims := []*ipamv1.IPAddressClaim{f.createClaim("a", "pool"), f.createClaim("b", "pool")}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, claim := range claims {
				assert.Len(c, f.recordsWithMarker(f.marker(claim.Name)), 1, "the record of claim %s", claim.Name)
			}
		}, waitTimeout, pollInterval)
		mgr.Kill()
		allow()
		addresses := &ipamv1.IPAddressList{}
		require.NoError(t, k8s.List(f.ctx, addresses, client.InNamespace(f.ns)))
		require.Empty(t, addresses.Items, "the killed manager wrote no IPAddress")
		for _, claim := range claims {
			got := &ipamv1.IPAddressClaim{}
			require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
			require.Empty(t, got.Annotations[v1alpha1.ReservationRecordAnnotation], "the cluster records nothing of the reservation")
		}

		require.NoError(t, k8s.Delete(f.ctx, pool))
		require.NoError(t, mgr.Start())

		// The new manager keeps the pool for the claims, and says so.
		cond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.DeletingReason)
		assert.Contains(t, cond.Message, "2 claims")
		assert.Contains(t, cond.Message, f.ns+"/a")
		f.waitEvent(f.ns, pool.GetName(), v1alpha1.DeletingReason)
		for _, claim := range claims {
			cond := f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
			assert.Contains(t, cond.Message, "waits for this claim to be deleted")
		}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), pool.DeepCopyObject().(client.Object)),
			"the pool waits while its claims may hold records")

		// Deleting the claims releases their records through the pool,
		// which then goes.
		for _, claim := range claims {
			require.NoError(t, k8s.Delete(f.ctx, claim))
		}
		for _, claim := range claims {
			f.waitGone(claim)
		}
		f.waitGone(pool)
		assert.Empty(t, f.markedRecords(), "every record of the claims is released")
		mgr.Stop()
	})
}

var (
	buildOnce sync.Once
	// buildDir holds the manager binary; the suite removes it.
	buildDir string
	built    string
	buildErr error
)

// managerBinary builds the manager binary once for the suite.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "ipam-bridge-manager-"); buildErr == nil {
			built, buildErr = managerproc.Build(buildDir)
		}
	})
	require.NoError(t, buildErr)
	return built
}

// startManagerProcess runs the manager binary for objects labelled filter,
// as a process of its own that the test may kill and restart.
func startManagerProcess(t *testing.T, bin, filter string, args ...string) *managerproc.Process {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, managerproc.WriteKubeconfig(restConfig, kubeconfig))
	health, err := managerproc.FreeAddr()
	require.NoError(t, err)
	diagnostics, err := managerproc.FreeAddr()
	require.NoError(t, err)
	mgr := &managerproc.Process{Bin: bin, Kubeconfig: kubeconfig, LogPath: filepath.Join(dir, "manager.log"), Args: []string{
		"--leader-elect=false", "--watch-filter=" + filter, "--manager-namespace=" + managerNamespace,
		"--health-addr=" + health, "--diagnostics-address=" + diagnostics, "--insecure-diagnostics=true", "--v=4",
	}}
	mgr.Args = append(mgr.Args, args...)
	require.NoError(t, mgr.Start())
	t.Cleanup(func() {
		mgr.Kill()
		if t.Failed() {
			t.Log(mgr.Tail(200))
		}
	})
	return mgr
}

// refuseIPAddresses makes the API server refuse to create IPAddresses in
// the fixture's namespace, until the function it returns is called.
func refuseIPAddresses(t *testing.T, f *fixture) func() {
	t.Helper()
	name := "refuse-ipaddresses-" + f.ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{ipamv1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"ipaddresses"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "refused by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	require.NoError(t, k8s.Create(f.ctx, policy))
	require.NoError(t, k8s.Create(f.ctx, binding))
	// The API server takes the policy up a moment later.
	refused := func() bool {
		err := k8s.Create(f.ctx, &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "probe"},
			Spec: ipamv1.IPAddressSpec{Address: "10.28.0.250", Prefix: ptr.To(int32(24)),
				ClaimRef: ipamv1.IPAddressClaimReference{Name: "probe"},
				PoolRef:  ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "probe"}},
		}, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "refused by the test")
	}
	require.Eventually(t, refused, waitTimeout, pollInterval, "the policy is not in force")
	allow := func() {
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(f.ctx, binding)))
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(f.ctx, policy)))
		require.Eventually(t, func() bool { return !refused() }, waitTimeout, pollInterval, "the policy is still in force")
	}
	t.Cleanup(func() {
		_ = k8s.Delete(f.ctx, binding)
		_ = k8s.Delete(f.ctx, policy)
	})
	return allow
}
