package endpoint

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// optInAnnotations are the annotations of the opt-in; any of them on a
// Cluster makes it ours to look at, so that one without the pool is
// reported rather than ignored.
var optInAnnotations = []string{
	v1alpha1.ControlPlaneEndpointPoolAnnotation,
	v1alpha1.ControlPlaneEndpointPoolGroupAnnotation,
	v1alpha1.ControlPlaneEndpointPortAnnotation,
	v1alpha1.ControlPlaneEndpointVariableAnnotation,
}

// kindPattern is what a Kubernetes kind looks like (CamelCase).
var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// optIn is what a Cluster's annotations ask for.
type optIn struct {
	pool ipamv1.IPPoolReference
	port int32
	// variable, when set, is the topology variable that gets the address
	// instead of spec.controlPlaneEndpoint.
	variable string
}

// optedIn says whether the Cluster carries any annotation of the opt-in.
func optedIn(annotations map[string]string) bool {
	for _, a := range optInAnnotations {
		if _, ok := annotations[a]; ok {
			return true
		}
	}
	return false
}

// parseOptIn reads the opt-in from a Cluster's annotations; the error says
// which annotation is wrong and why.
func parseOptIn(annotations map[string]string) (optIn, error) {
	out := optIn{port: v1alpha1.DefaultControlPlaneEndpointPort}
	ref, ok := annotations[v1alpha1.ControlPlaneEndpointPoolAnnotation]
	if !ok {
		return out, fmt.Errorf("annotation %s is missing: it names the pool, as <Kind>/<name>",
			v1alpha1.ControlPlaneEndpointPoolAnnotation)
	}
	kind, name, found := strings.Cut(ref, "/")
	if !found || !kindPattern.MatchString(kind) {
		return out, fmt.Errorf("annotation %s is %q: want <Kind>/<name>, for example NetboxIPPool/prod-vlan-120",
			v1alpha1.ControlPlaneEndpointPoolAnnotation, ref)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return out, fmt.Errorf("annotation %s is %q: the pool's name %q is not valid: %s",
			v1alpha1.ControlPlaneEndpointPoolAnnotation, ref, name, strings.Join(errs, "; "))
	}
	group := v1alpha1.GroupVersion.Group
	if g, ok := annotations[v1alpha1.ControlPlaneEndpointPoolGroupAnnotation]; ok {
		if errs := validation.IsDNS1123Subdomain(g); len(errs) > 0 {
			return out, fmt.Errorf("annotation %s is %q, not an API group: %s",
				v1alpha1.ControlPlaneEndpointPoolGroupAnnotation, g, strings.Join(errs, "; "))
		}
		group = g
	}
	out.pool = ipamv1.IPPoolReference{APIGroup: group, Kind: kind, Name: name}
	if p, ok := annotations[v1alpha1.ControlPlaneEndpointPortAnnotation]; ok {
		port, err := strconv.ParseInt(p, 10, 32)
		if err != nil || port < 1 || port > 65535 {
			return out, fmt.Errorf("annotation %s is %q: want a port from 1 to 65535",
				v1alpha1.ControlPlaneEndpointPortAnnotation, p)
		}
		out.port = int32(port)
	}
	if v, ok := annotations[v1alpha1.ControlPlaneEndpointVariableAnnotation]; ok {
		// As the Cluster's CRD and CAPI's webhook accept variable names.
		if v == "" || len(v) > 256 || strings.HasPrefix(v, "builtin") {
			return out, fmt.Errorf("annotation %s is %q: want the name of a variable of the Cluster's ClusterClass",
				v1alpha1.ControlPlaneEndpointVariableAnnotation, v)
		}
		out.variable = v
	}
	return out, nil
}
