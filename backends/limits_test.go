package backends

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestTruncateFitsTheLimitOnRuneBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short text is kept", "abc", 5, "abc"},
		{"text at the limit is kept", "abcde", 5, "abcde"},
		{"long text ends with an ellipsis within the limit", "abcdefgh", 5, "abcd…"},
		{"multi-byte runes are never split", "äöüßéèà", 4, "äöü…"},
		{"a 200-character description stays at 200", strings.Repeat("x", 250), 200, strings.Repeat("x", 199) + "…"},
		{"no room", "abc", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.limit)
			assert.Equal(t, tc.want, got)
			assert.True(t, utf8.ValidString(got))
			assert.LessOrEqual(t, utf8.RuneCountInString(got), max(tc.limit, 0))
		})
	}
}

func TestCheckDNSName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		valid bool
	}{
		{"machine-0.cluster.example.com", true},
		{"machine_0.example.com.", true},
		{"*.example.com", true},
		{"has space.example.com", false},
		{"two..dots", false},
		{"", false},
		{strings.Repeat("a", 63) + "." + strings.Repeat("b", 200), false},
	} {
		err := CheckDNSName("dnsName", tc.name, 255)
		if tc.valid {
			assert.NoError(t, err, tc.name)
		} else {
			assert.True(t, errors.Is(err, ErrInvalidConfig), "%q: %v", tc.name, err)
		}
	}
}
