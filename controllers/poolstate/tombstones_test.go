package poolstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestTombstonesKeepTheEarliestExpiryUntilAnAuditSawIt(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	pool, other := types.UID("pool"), types.UID("other")
	for _, tc := range []struct {
		name     string
		adds     []time.Duration
		auditAt  time.Duration
		wantNext time.Duration
		wantKept bool
	}{
		{name: "the earliest of several is kept", adds: []time.Duration{10 * time.Minute, 5 * time.Minute, 20 * time.Minute}, auditAt: -time.Hour, wantNext: 5 * time.Minute, wantKept: true},
		{name: "an audit after the expiry forgets it", adds: []time.Duration{5 * time.Minute}, auditAt: 5 * time.Minute, wantKept: false},
		{name: "a release during the audit is kept", adds: []time.Duration{15 * time.Minute}, auditAt: 10 * time.Minute, wantNext: 15 * time.Minute, wantKept: true},
		{name: "nothing noted", auditAt: 0, wantKept: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts Tombstones
			for _, d := range tc.adds {
				ts.Add(pool, t0.Add(d))
			}
			ts.Add(other, t0)
			ts.ForgetUntil(pool, t0.Add(tc.auditAt))
			next, ok := ts.Next(pool)
			assert.Equal(t, tc.wantKept, ok)
			if tc.wantKept {
				assert.Equal(t, t0.Add(tc.wantNext), next)
			}
			otherNext, ok := ts.Next(other)
			assert.True(t, ok, "another pool's expiry is untouched")
			assert.Equal(t, t0, otherNext)
		})
	}
}
