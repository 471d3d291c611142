package claim

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// fakeMACWriter answers WriteMAC with carried and err, and remembers the
// MAC it was asked to write.
type fakeMACWriter struct {
	carried string
	err     error
	asked   string
}

func (w *fakeMACWriter) WriteMAC(_ context.Context, _ backends.Record, mac string) (string, error) {
	w.asked = mac
	return w.carried, w.err
}

// TestWriteMACSaysWhatCameOfIt: the claim of a MAC written says
// MACAddressWritten and records the MAC and its source; a record that
// carried another MAC keeps it and is handed to the comparison; a refusal
// says MACAddressNotWritten and is not tried again; a record that matches
// no client by MAC drops the condition; a failure to reach the grid is an
// error and the claim still waits.
func TestWriteMACSaysWhatCameOfIt(t *testing.T) {
	const mac = "00:50:56:aa:bb:01"
	src := macaddress.Source{Kind: macaddress.VSphereVMKind, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm-a"}}
	tests := []struct {
		name        string
		writer      *fakeMACWriter
		wantErr     bool
		wantReason  string // "" when the condition is gone
		wantStatus  metav1.ConditionStatus
		wantMAC     string // the claim's MAC annotation
		wantEvent   string
		wantWaiting bool
	}{
		{name: "written", writer: &fakeMACWriter{carried: mac}, wantReason: reasons.MACAddressWrittenReason,
			wantStatus: metav1.ConditionTrue, wantMAC: mac, wantEvent: reasons.MACAddressWrittenReason},
		{name: "the record carried another MAC", writer: &fakeMACWriter{carried: "52:54:00:00:00:99"}, wantMAC: "52:54:00:00:00:99"},
		{name: "a plan without a MAC", writer: &fakeMACWriter{}},
		{name: "refused", writer: &fakeMACWriter{err: fmt.Errorf("held by fixedaddress/x: %w", backends.ErrMACAddressInUse)},
			wantReason: reasons.MACAddressNotWrittenReason, wantStatus: metav1.ConditionFalse, wantEvent: reasons.MACAddressNotWrittenReason},
		{name: "no longer the claim's", writer: &fakeMACWriter{err: backends.ErrNotOwned},
			wantReason: reasons.MACAddressNotWrittenReason, wantStatus: metav1.ConditionFalse, wantEvent: reasons.MACAddressNotWrittenReason},
		{name: "matches no client by MAC", writer: &fakeMACWriter{err: backends.ErrNoMACMatch}},
		{name: "the grid is down", writer: &fakeMACWriter{err: fmt.Errorf("reaching the grid: %w", backends.ErrUnavailable)}, wantErr: true,
			wantReason: reasons.MACAddressDeferredReason, wantStatus: metav1.ConditionFalse, wantWaiting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-a-0-0"}}
			s := &scope{claim: claim, kind: kindOf(apitest.MachineMACPool()), pool: apitest.MachineMACPool()}
			deferMAC(s, "no macAddr")
			s.conclude()
			recorder := events.NewFakeRecorder(10)
			r := &ClaimReconciler{Recorder: recorder, MACAddresses: &macaddress.Sources{}}
			key := types.NamespacedName{Namespace: "ns", Name: "vm-a-0-0"}
			r.MACAddresses.Await(key)
			r.MACAddresses.Watch(src, key)

			err := r.writeMAC(context.Background(), s, tt.writer,
				backends.Record{Reference: "fixedaddress/abc:10.0.0.5/default", Marker: "id/ns/vm-a-0-0"}, macaddress.Found{MAC: mac, Source: src})
			s.conclude()
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, mac, tt.writer.asked)
			cond := conditions.Get(claim, v1alpha1.MACAddressCurrentCondition)
			if tt.wantReason == "" {
				assert.Nil(t, cond)
			} else if assert.NotNil(t, cond) {
				assert.Equal(t, tt.wantReason, cond.Reason)
				assert.Equal(t, tt.wantStatus, cond.Status)
			}
			assert.Equal(t, tt.wantMAC, claim.Annotations[v1alpha1.MACAddressAnnotation])
			if tt.wantMAC != "" {
				assert.Equal(t, src.Key(), claim.Annotations[v1alpha1.MACAddressSourceAnnotation])
			}
			select {
			case e := <-recorder.Events:
				assert.Contains(t, e, tt.wantEvent)
			default:
				assert.Empty(t, tt.wantEvent, "no event")
			}
			assert.Equal(t, tt.wantWaiting, r.MACAddresses.Awaits(key), "the claim still waits for its MAC to be written")
		})
	}
}
