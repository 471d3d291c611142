// Command demo shows the provider end to end on one machine: it starts a
// real kube-apiserver and etcd (envtest), the NetBox simulator and the
// manager, binds a few IPAddressClaims to a NetboxIPPool, prints which
// address each got and what NetBox recorded, then deletes the claims and
// shows the addresses released.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

const (
	namespace = "demo"
	prefix    = "192.0.2.0/24"
	claims    = 4
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctrl.SetLogger(logr.Discard())

	step("Starting kube-apiserver and etcd (envtest)")
	env, cfg, err := envtestenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	step("Starting the NetBox simulator with prefix " + prefix + " (gateway 192.0.2.1 recorded)")
	sim := netboxsim.New()
	defer sim.Close()
	token := "0123456789abcdef0123456789abcdef01234567"
	sim.AddToken(token, true)
	sim.AddPrefixWithGateway(prefix, netboxsim.PrefixOptions{})

	step("Starting the manager")
	s := scheme.New()
	if _, err := envtestenv.StartManager(ctx, cfg, s, controllers.Options{ManagerNamespace: namespace, ClaimConcurrency: 4}); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}

	step("Creating a NetboxIPPool, a Cluster and %d IPAddressClaims", claims)
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "netbox",
				Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
			Data: map[string][]byte{v1alpha1.NetboxTokenKey: []byte(token)},
		},
		&v1alpha1.NetboxIPPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "lab"},
			Spec: v1alpha1.NetboxIPPoolSpec{
				Connection: v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
				Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: prefix}}},
				Reservation: v1alpha1.NetboxReservation{
					DNSNamePattern: "{{ .ClaimName }}.{{ .ClusterName }}.example.com",
				},
			},
		},
		&clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "workload"},
			Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
		},
	}
	for i := range claims {
		objects = append(objects, &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("workload-md-0-%d", i)},
			Spec: ipamv1.IPAddressClaimSpec{
				ClusterName: "workload",
				PoolRef:     ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "lab"},
			},
		})
	}
	for _, o := range objects {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}

	step("Waiting for every claim to be bound")
	if err := waitFor(ctx, func() (bool, error) {
		list := &ipamv1.IPAddressClaimList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		for _, claim := range list.Items {
			if !conditions.IsTrue(&claim, ipamv1.IPAddressClaimReadyCondition) {
				return false, nil
			}
		}
		return len(list.Items) == claims, nil
	}); err != nil {
		return err
	}

	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tADDRESS\tGATEWAY\tNETBOX RECORD")
	records := map[string]netboxsim.IPAddress{}
	for _, r := range sim.IPAddresses() {
		records[strings.SplitN(r.Address, "/", 2)[0]] = r
	}
	for i := range claims {
		address := &ipamv1.IPAddress{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: fmt.Sprintf("workload-md-0-%d", i)}, address); err != nil {
			return err
		}
		r := records[address.Spec.Address]
		fmt.Fprintf(tw, "%s\t%s/%d\t%s\t#%d %s, marker %q\n", address.Name, address.Spec.Address, ptr.Deref(address.Spec.Prefix, 0),
			address.Spec.Gateway, r.ID, r.DNSName, r.CustomFields["capi_ipam_claim"])
	}
	_ = tw.Flush()
	calls := sim.Calls()
	// The pool's counts are refreshed at most once per --pool-refresh-interval
	// (10s), however many claims bind: wait for the refresh after the burst,
	// then print what NetBox holds, the gateway included.
	if err := waitForCounts(ctx, c, int64(len(sim.IPAddresses()))); err != nil {
		return err
	}
	printPool(ctx, c)

	step("Deleting the claims")
	if err := c.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(namespace)); err != nil {
		return err
	}
	if err := waitFor(ctx, func() (bool, error) {
		list := &ipamv1.IPAddressList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	}); err != nil {
		return err
	}
	var left []string
	for _, r := range sim.IPAddresses() {
		left = append(left, r.Address+" ("+r.Description+")")
	}
	fmt.Printf("\nAll IPAddresses deleted. NetBox now holds: %s\n", strings.Join(left, ", "))
	if len(left) != 1 {
		return fmt.Errorf("expected only the gateway to remain in NetBox, found %d records", len(left))
	}
	if err := waitForCounts(ctx, c, int64(len(left))); err != nil {
		return err
	}
	printPool(ctx, c)
	fmt.Printf("\nNetBox requests while binding %d claims (pool validation included): %d\n", claims, len(calls))
	step("Done")
	return nil
}

// waitForCounts waits for the pool's status to count used addresses, as
// NetBox does.
func waitForCounts(ctx context.Context, c client.Client, used int64) error {
	step("Waiting for the pool's counts to be refreshed (at most every --pool-refresh-interval)")
	return waitFor(ctx, func() (bool, error) {
		pool := &v1alpha1.NetboxIPPool{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "lab"}, pool); err != nil {
			return false, err
		}
		return pool.Status.Addresses != nil && pool.Status.Addresses.Used == used, nil
	})
}

func printPool(ctx context.Context, c client.Client) {
	pool := &v1alpha1.NetboxIPPool{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "lab"}, pool); err != nil || pool.Status.Addresses == nil {
		return
	}
	a := pool.Status.Addresses
	fmt.Printf("\nNetboxIPPool lab: Ready=%v total=%d used=%d free=%d\n",
		conditions.IsTrue(pool, v1alpha1.ReadyCondition), a.Total, a.Used, a.Free)
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func waitFor(ctx context.Context, done func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, err := done()
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return ok, err
	})
}
