// CAPM3 v1.13.2 imports sigs.k8s.io/cluster-api/errors, which Cluster API
// v1.14 moved to sigs.k8s.io/cluster-api/api/deprecated/errors. This module
// takes the old import path (test/metal3e2e/go.mod replaces it with this
// directory) and re-exports the names CAPM3 uses; nothing else needs it.
module sigs.k8s.io/cluster-api/errors

go 1.26.0

require sigs.k8s.io/cluster-api/api v1.14.2
