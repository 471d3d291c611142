package netboxsim

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Field parsers mirroring the DRF and NetBox serializer fields: each returns
// the parsed value or the error message the real field would give.

// charField is DRF's CharField: whitespace trimmed, numbers accepted.
func charField(v any, allowBlank bool, maxLen int) (string, string) {
	var s string
	switch x := v.(type) {
	case nil:
		return "", "This field may not be null."
	case string:
		s = strings.TrimSpace(x)
	case float64:
		s = pyRepr(x)
	default:
		return "", "Not a valid string."
	}
	if s == "" && !allowBlank {
		return "", "This field may not be blank."
	}
	if maxLen > 0 && utf8.RuneCountInString(s) > maxLen {
		return "", fmt.Sprintf("Ensure this field has no more than %d characters.", maxLen)
	}
	return s, ""
}

// choiceField is NetBox's ChoiceField (netbox/api/fields.py): null becomes
// "", "true"/"false" and integers are converted before the lookup.
func choiceField(v any, choices map[string]string, allowBlank bool) (string, string) {
	if v == nil {
		v = ""
	}
	if v == "" {
		if allowBlank {
			return "", ""
		}
		return "", "This field may not be blank."
	}
	switch x := v.(type) {
	case map[string]any, []any:
		return "", `Value must be passed directly (e.g. "foo": 123); do not use a dictionary or list.`
	case string:
		if _, ok := choices[x]; ok {
			return x, ""
		}
		switch {
		case strings.EqualFold(x, "true"):
			v = true
		case strings.EqualFold(x, "false"):
			v = false
		default:
			if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
				v = float64(n)
			}
		}
	}
	return "", fmt.Sprintf("%s is not a valid choice.", pyStr(v))
}

// integerField is DRF's IntegerField.
func integerField(v any) (int, string) {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) {
			return int(x), ""
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, ""
		}
	case nil:
		return 0, "This field may not be null."
	}
	return 0, "A valid integer is required."
}

// booleanField is DRF's BooleanField.
func booleanField(v any) (bool, string) {
	switch x := v.(type) {
	case bool:
		return x, ""
	case float64:
		if x == 0 || x == 1 {
			return x == 1, ""
		}
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "t", "yes", "y", "on", "1":
			return true, ""
		case "false", "f", "no", "n", "off", "0":
			return false, ""
		}
	case nil:
		return false, "This field may not be null."
	}
	return false, "Must be a valid boolean."
}

// dnsNamePattern is NetBox's DNSValidator (ipam/validators.py).
var dnsNamePattern = regexp.MustCompile(`^([0-9A-Za-z_-]+|\*)(\.[0-9A-Za-z_-]+)*\.?$`)

const dnsNameMessage = "Only alphanumeric characters, asterisks, hyphens, periods, and underscores are allowed in DNS names"

// dnsNameField validates dns_name: blank is allowed and skips validators;
// DRF reports every failing validator.
func dnsNameField(v any) (string, []string) {
	s, msg := charField(v, true, 0)
	if msg != "" {
		return "", []string{msg}
	}
	if s == "" {
		return "", nil
	}
	var msgs []string
	if !dnsNamePattern.MatchString(s) {
		msgs = append(msgs, dnsNameMessage)
	}
	if utf8.RuneCountInString(s) > 255 {
		msgs = append(msgs, "Ensure this field has no more than 255 characters.")
	}
	return s, msgs
}

// listField checks DRF's "many" shape.
func listField(v any) ([]any, string) {
	switch x := v.(type) {
	case nil:
		return nil, "This field may not be null."
	case []any:
		return x, ""
	default:
		return nil, fmt.Sprintf("Expected a list of items but got type \"%s\".", pyTypeName(v))
	}
}
