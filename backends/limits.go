package backends

import (
	"fmt"
	"regexp"
	"unicode/utf8"
)

// MaxDNSName is the longest DNS name NetBox and NIOS take: 255 characters.
const MaxDNSName = 255

// Truncate shortens s to at most limit characters (runes, as NetBox and
// NIOS count them), cutting on a rune boundary and ending with "…" when it
// cut, so the result always fits the limit.
func Truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit <= 0 {
		return ""
	}
	kept := 0
	for i := range s {
		if kept == limit-1 {
			return s[:i] + "…"
		}
		kept++
	}
	return s
}

// dnsName is NetBox's dns_name syntax: labels of letters, digits, '-' and
// '_', or a leading '*', separated by dots, with an optional final dot.
var dnsName = regexp.MustCompile(`^([0-9A-Za-z_-]+|\*)(\.[0-9A-Za-z_-]+)*\.?$`)

// CheckDNSName says whether a rendered name is a DNS name of at most limit
// characters; a name that is not cannot be cut to fit without naming
// something else.
func CheckDNSName(what, name string, limit int) error {
	if len(name) > limit {
		return fmt.Errorf("%w: %s %q is %d characters long; the limit is %d", ErrInvalidConfig, what, name, len(name), limit)
	}
	if !dnsName.MatchString(name) {
		return fmt.Errorf("%w: %s %q is not a DNS name (letters, digits, '-' and '_' in labels separated by dots)", ErrInvalidConfig, what, name)
	}
	return nil
}
