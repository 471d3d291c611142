package claim

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
)

// metadataReader serves objects' metadata by kind and name, and records
// what was read.
type metadataReader struct {
	owners map[string][]metav1.OwnerReference
	errs   map[string]error
	gets   []string
}

func (r *metadataReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	p := obj.(*metav1.PartialObjectMetadata)
	k := p.Kind + "/" + key.Name
	r.gets = append(r.gets, k)
	if err := r.errs[k]; err != nil {
		return err
	}
	owners, ok := r.owners[k]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: p.Kind}, key.Name)
	}
	p.Name, p.Namespace, p.UID, p.OwnerReferences = key.Name, key.Namespace, types.UID(k), owners
	return nil
}

func (r *metadataReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("MachineNames must not list")
}

func TestMachineNamesEnsure(t *testing.T) {
	metal3Data := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Data", "workers-0")
	template := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3DataTemplate", "workers")
	dataClaim := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3DataClaim", "m3m-a")
	m3m := apitest.OwnerRef(apitest.InfraV1beta1, "Metal3Machine", "m3m-a")
	vsphereVM := apitest.OwnerRef(apitest.InfraV1beta1, "VSphereVM", "vm-a")
	vsphereMachine := apitest.OwnerRef(apitest.InfraV1beta1, "VSphereMachine", "vm-a")
	machineSet := apitest.OwnerRef("cluster.x-k8s.io/v1beta2", "MachineSet", "md-0-abc")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "metal3machines"}, "m3m-a", errors.New("no RBAC"))

	tests := []struct {
		name        string
		claimOwners []metav1.OwnerReference
		annotation  string
		owners      map[string][]metav1.OwnerReference
		errs        map[string]error
		want        string
		wantGets    []string
		wantErr     bool
	}{
		{
			name:        "owned by a Machine",
			claimOwners: []metav1.OwnerReference{apitest.MachineRef("machine-a")},
			want:        "machine-a",
		},
		{
			name:        "Metal3: Metal3Data, its Metal3DataClaim, the Metal3Machine",
			claimOwners: []metav1.OwnerReference{metal3Data},
			owners: map[string][]metav1.OwnerReference{
				"Metal3Data/workers-0":  {template, dataClaim, m3m},
				"Metal3DataClaim/m3m-a": {m3m},
				"Metal3Machine/m3m-a":   {apitest.MachineRef("machine-a")},
			},
			want:     "machine-a",
			wantGets: []string{"Metal3Data/workers-0", "Metal3DataClaim/m3m-a", "Metal3Machine/m3m-a"},
		},
		{
			name:        "Metal3: the Metal3DataClaim is gone, the Metal3Machine ref remains",
			claimOwners: []metav1.OwnerReference{metal3Data},
			owners: map[string][]metav1.OwnerReference{
				"Metal3Data/workers-0": {template, dataClaim, m3m},
				"Metal3Machine/m3m-a":  {apitest.MachineRef("machine-a")},
			},
			want:     "machine-a",
			wantGets: []string{"Metal3Data/workers-0", "Metal3DataClaim/m3m-a", "Metal3Machine/m3m-a"},
		},
		{
			name:        "CAPV: VSphereVM, VSphereMachine",
			claimOwners: []metav1.OwnerReference{vsphereVM},
			owners: map[string][]metav1.OwnerReference{
				"VSphereVM/vm-a":      {vsphereMachine},
				"VSphereMachine/vm-a": {apitest.MachineRef("machine-b")},
			},
			want:     "machine-b",
			wantGets: []string{"VSphereVM/vm-a", "VSphereMachine/vm-a"},
		},
		{
			name:        "a recorded name is kept and nothing is read",
			claimOwners: []metav1.OwnerReference{vsphereVM},
			annotation:  "chosen",
			want:        "chosen",
		},
		{
			name: "no owner: the claim's name",
			want: "claim-0",
		},
		{
			name:        "the infrastructure machine is not owned by a Machine yet: the claim's name",
			claimOwners: []metav1.OwnerReference{vsphereVM},
			owners: map[string][]metav1.OwnerReference{
				"VSphereVM/vm-a":      {vsphereMachine},
				"VSphereMachine/vm-a": {machineSet},
			},
			want:     "claim-0",
			wantGets: []string{"VSphereVM/vm-a", "VSphereMachine/vm-a"},
		},
		{
			name:        "kinds not followed are not read",
			claimOwners: []metav1.OwnerReference{apitest.OwnerRef("apps/v1", "Deployment", "d"), template},
			want:        "claim-0",
		},
		{
			name:        "a Machine of another group is not a Machine",
			claimOwners: []metav1.OwnerReference{apitest.OwnerRef(apitest.InfraV1beta1, "Machine", "not-capi")},
			want:        "claim-0",
		},
		{
			name:        "an owner that is gone ends the chain",
			claimOwners: []metav1.OwnerReference{vsphereVM},
			want:        "claim-0",
			wantGets:    []string{"VSphereVM/vm-a"},
		},
		{
			name:        "an owner the manager may not read ends the chain",
			claimOwners: []metav1.OwnerReference{metal3Data},
			owners: map[string][]metav1.OwnerReference{
				"Metal3Data/workers-0": {m3m},
			},
			errs:     map[string]error{"Metal3Machine/m3m-a": forbidden},
			want:     "claim-0",
			wantGets: []string{"Metal3Data/workers-0", "Metal3Machine/m3m-a"},
		},
		{
			name:        "a namesake of the owner is not followed",
			claimOwners: []metav1.OwnerReference{{APIVersion: apitest.InfraV1beta1, Kind: "VSphereVM", Name: "vm-a", UID: "old"}},
			owners: map[string][]metav1.OwnerReference{
				"VSphereVM/vm-a":      {vsphereMachine},
				"VSphereMachine/vm-a": {apitest.MachineRef("machine-b")},
			},
			want:     "claim-0",
			wantGets: []string{"VSphereVM/vm-a"},
		},
		{
			name:        "a cycle ends",
			claimOwners: []metav1.OwnerReference{vsphereVM},
			owners: map[string][]metav1.OwnerReference{
				"VSphereVM/vm-a":      {vsphereMachine},
				"VSphereMachine/vm-a": {vsphereVM},
			},
			want:     "claim-0",
			wantGets: []string{"VSphereVM/vm-a", "VSphereMachine/vm-a"},
		},
		{
			name:        "any other error is returned and nothing is recorded",
			claimOwners: []metav1.OwnerReference{vsphereVM},
			errs:        map[string]error{"VSphereVM/vm-a": apierrors.NewServiceUnavailable("etcd")},
			wantGets:    []string{"VSphereVM/vm-a"},
			wantErr:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := &metadataReader{owners: tt.owners, errs: tt.errs}
			names := &MachineNames{Reader: reader, Follow: owners.ConsumerOwnerKinds}
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-0", OwnerReferences: tt.claimOwners}}
			if tt.annotation != "" {
				claim.Annotations = map[string]string{v1alpha1.MachineNameAnnotation: tt.annotation}
			}

			err := names.Ensure(context.Background(), claim)
			assert.Equal(t, tt.wantGets, reader.gets)
			if tt.wantErr {
				require.Error(t, err)
				assert.NotContains(t, claim.Annotations, v1alpha1.MachineNameAnnotation)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, claim.Annotations[v1alpha1.MachineNameAnnotation])
			assert.Equal(t, tt.want, owners.MachineName(claim))
		})
	}
}

func TestMachineNameOfAClaimWithoutAnnotation(t *testing.T) {
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "bound-before-upgrade"}}
	assert.Equal(t, "bound-before-upgrade", owners.MachineName(claim))
}
