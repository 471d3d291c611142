package apitest

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const InfraV1beta1 = "infrastructure.cluster.x-k8s.io/v1beta1"

func OwnerRef(apiVersion, kind, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(kind + "/" + name)}
}

func MachineRef(name string) metav1.OwnerReference {
	return OwnerRef("cluster.x-k8s.io/v1beta2", "Machine", name)
}
