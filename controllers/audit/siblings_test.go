package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSystemOfNamesOneSystemHoweverItsURLIsSpelt(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://netbox.example.com", "https://NetBox.example.com:443/", true},
		{"http://netbox.example.com", "http://netbox.example.com:80", true},
		{"https://gm.example.com:443", "https://gm.example.com", true},
		{"https://netbox.example.com/netbox", "https://netbox.example.com/netbox/", true},
		{"https://netbox.example.com", "https://netbox.example.com:8443", false},
		{"https://netbox.example.com/a", "https://netbox.example.com/b", false},
		{"https://netbox.example.com", "http://netbox.example.com", false},
		{"https://netbox-a.example.com", "https://netbox-b.example.com", false},
	} {
		t.Run(tc.a+" "+tc.b, func(t *testing.T) {
			assert.Equal(t, tc.same, systemOf(tc.a) == systemOf(tc.b), "%q, %q", systemOf(tc.a), systemOf(tc.b))
		})
	}
}
