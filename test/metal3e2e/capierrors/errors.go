// Package errors re-exports, under Cluster API's pre-v1.14 import path, the
// names of sigs.k8s.io/cluster-api/api/deprecated/errors that CAPM3 v1.13.2
// uses.
package errors

import deprecated "sigs.k8s.io/cluster-api/api/deprecated/errors"

type (
	// MachineStatusError is deprecated.MachineStatusError.
	MachineStatusError = deprecated.MachineStatusError
	// ClusterStatusError is deprecated.ClusterStatusError.
	ClusterStatusError = deprecated.ClusterStatusError
)

const (
	InvalidConfigurationMachineError = deprecated.InvalidConfigurationMachineError
	CreateMachineError               = deprecated.CreateMachineError
	UpdateMachineError               = deprecated.UpdateMachineError
	DeleteMachineError               = deprecated.DeleteMachineError
	InvalidConfigurationClusterError = deprecated.InvalidConfigurationClusterError
)
