package notfound

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
)

func TestAWriteToAnObjectThatIsGoneIsNoError(t *testing.T) {
	resource := schema.GroupResource{Group: "ipam.cluster.x-k8s.io", Resource: "netboxippools"}
	gone := apierrors.NewNotFound(resource, "p")
	conflict := apierrors.NewConflict(resource, "p", errors.New("changed"))
	// As sigs.k8s.io/cluster-api/util/patch wraps them.
	helper := func(errs ...error) error {
		for i, err := range errs {
			errs[i] = fmt.Errorf("failed to patch spec and metadata: %w", err)
		}
		return fmt.Errorf("failed to patch NetboxIPPool ns/p: %w", kerrors.NewAggregate(errs))
	}
	tests := []struct {
		name  string
		err   error
		wantI bool // ignored
	}{
		{"no error", nil, true},
		{"gone, from the helper", helper(gone), true},
		{"gone, from each of the helper's patches", helper(gone, gone), true},
		{"gone, alone", gone, true},
		{"gone and a conflict", helper(gone, conflict), false},
		{"a conflict, from the helper", helper(conflict), false},
		{"a conflict, alone", conflict, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantI {
				assert.NoError(t, Ignore(tt.err))
			} else {
				assert.Equal(t, tt.err, Ignore(tt.err))
			}
		})
	}
}
