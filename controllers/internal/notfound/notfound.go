// Package notfound tells a write that failed because its object is gone
// from one that failed for another reason.
package notfound

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Ignore drops err when all it says is that the object is gone, as it is
// when the object was deleted while it was reconciled, or once a reconcile
// read from a cache behind a finalizer's removal lets it go again: an
// expected outcome, not an error to log and retry. Unlike
// client.IgnoreNotFound it sees through the aggregate that
// sigs.k8s.io/cluster-api/util/patch wraps its errors in.
func Ignore(err error) error {
	var agg kerrors.Aggregate
	if errors.As(err, &agg) {
		if kerrors.FilterOut(agg, apierrors.IsNotFound) == nil {
			return nil
		}
		return err
	}
	return client.IgnoreNotFound(err)
}
