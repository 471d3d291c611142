package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The requests per claim are judged as printed: a tie at two decimals is a
// tie, and a hundredth more is more.
func TestPerClaimAtMostJudgesWhatIsPrinted(t *testing.T) {
	for _, tc := range []struct {
		ours, theirs float64
		want         bool
	}{
		{ours: 4005.0 / 1000, theirs: 4.0, want: true}, // prints 4.00 vs 4.00; 4.005*100 is 400.5
		{ours: 4.0, theirs: 4.0, want: true},
		{ours: 3.99, theirs: 4.0, want: true},
		{ours: 4.01, theirs: 4.0, want: false},
		{ours: 4012.0 / 1000, theirs: 4008.0 / 1000, want: true}, // 4.01 vs 4.01
	} {
		assert.Equal(t, tc.want, perClaimAtMost(tc.ours, tc.theirs), "%.4f vs %.4f", tc.ours, tc.theirs)
	}
}
