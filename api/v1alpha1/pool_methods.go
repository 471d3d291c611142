package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GetConditions returns the pool's conditions.
func (p *NetboxIPPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the pool's conditions.
func (p *NetboxIPPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetPoolStatus returns the status shared by all pool kinds.
func (p *NetboxIPPool) GetPoolStatus() *PoolStatus { return &p.Status }

// GetNetboxSpec returns the NetBox settings of the pool.
func (p *NetboxIPPool) GetNetboxSpec() *NetboxIPPoolSpec { return &p.Spec }

// GetConditions returns the pool's conditions.
func (p *GlobalNetboxIPPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the pool's conditions.
func (p *GlobalNetboxIPPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetPoolStatus returns the status shared by all pool kinds.
func (p *GlobalNetboxIPPool) GetPoolStatus() *PoolStatus { return &p.Status }

// GetNetboxSpec returns the NetBox settings of the pool.
func (p *GlobalNetboxIPPool) GetNetboxSpec() *NetboxIPPoolSpec { return &p.Spec }

// GetConditions returns the pool's conditions.
func (p *InfobloxIPPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the pool's conditions.
func (p *InfobloxIPPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetPoolStatus returns the status shared by all pool kinds.
func (p *InfobloxIPPool) GetPoolStatus() *PoolStatus { return &p.Status }

// GetInfobloxSpec returns the Infoblox settings of the pool.
func (p *InfobloxIPPool) GetInfobloxSpec() *InfobloxIPPoolSpec { return &p.Spec }

// GetConditions returns the pool's conditions.
func (p *GlobalInfobloxIPPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets the pool's conditions.
func (p *GlobalInfobloxIPPool) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// GetPoolStatus returns the status shared by all pool kinds.
func (p *GlobalInfobloxIPPool) GetPoolStatus() *PoolStatus { return &p.Status }

// GetInfobloxSpec returns the Infoblox settings of the pool.
func (p *GlobalInfobloxIPPool) GetInfobloxSpec() *InfobloxIPPoolSpec { return &p.Spec }

// GetOrphans returns the pool's orphan policy.
func (p *NetboxIPPool) GetOrphans() Orphans { return p.Spec.Orphans }

// GetRelease returns the pool's release settings.
func (p *NetboxIPPool) GetRelease() ReleaseSettings { return p.Spec.Release }

// GetOrphans returns the pool's orphan policy.
func (p *GlobalNetboxIPPool) GetOrphans() Orphans { return p.Spec.Orphans }

// GetRelease returns the pool's release settings.
func (p *GlobalNetboxIPPool) GetRelease() ReleaseSettings { return p.Spec.Release }

// GetOrphans returns the pool's orphan policy.
func (p *InfobloxIPPool) GetOrphans() Orphans { return p.Spec.Orphans }

// GetRelease returns the pool's release settings.
func (p *InfobloxIPPool) GetRelease() ReleaseSettings { return p.Spec.Release }

// GetOrphans returns the pool's orphan policy.
func (p *GlobalInfobloxIPPool) GetOrphans() Orphans { return p.Spec.Orphans }

// GetRelease returns the pool's release settings.
func (p *GlobalInfobloxIPPool) GetRelease() ReleaseSettings { return p.Spec.Release }

// GetPreAllocations returns the addresses the pool requests for claims by
// name.
func (p *NetboxIPPool) GetPreAllocations() PreAllocations { return p.Spec.PreAllocations }

// GetPreAllocations returns the addresses the pool requests for claims by
// name.
func (p *GlobalNetboxIPPool) GetPreAllocations() PreAllocations { return p.Spec.PreAllocations }

// GetPreAllocations returns the addresses the pool requests for claims by
// name.
func (p *InfobloxIPPool) GetPreAllocations() PreAllocations { return p.Spec.PreAllocations }

// GetPreAllocations returns the addresses the pool requests for claims by
// name.
func (p *GlobalInfobloxIPPool) GetPreAllocations() PreAllocations { return p.Spec.PreAllocations }

// For returns the address requested for the claim namespace/name: the
// entry "<namespace>/<name>", else "<name>"; ok is false when neither is.
func (p PreAllocations) For(namespace, name string) (IPAddressString, bool) {
	if a, ok := p[namespace+"/"+name]; ok {
		return a, true
	}
	a, ok := p[name]
	return a, ok
}
