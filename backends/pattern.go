package backends

import (
	"fmt"
	"strings"
	"text/template"
)

// Pattern is a Go template a pool uses to name or describe its records, over
// .ClaimName, .Namespace, .ClusterName and .MachineName.
type Pattern struct {
	t *template.Template
}

type patternData struct {
	ClaimName   string
	Namespace   string
	ClusterName string
	MachineName string
}

// ParsePattern parses text; the empty text gives a Pattern that renders "".
// It renders once with sample data so that a pattern naming an unknown field
// fails at pool validation rather than at the first allocation.
func ParsePattern(name, text string) (Pattern, error) {
	if text == "" {
		return Pattern{}, nil
	}
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return Pattern{}, fmt.Errorf("%w: %s pattern: %v", ErrInvalidConfig, name, err)
	}
	p := Pattern{t: t}
	if _, err := p.Render(Claim{Name: "claim", Namespace: "ns", ClusterName: "cluster", MachineName: "machine"}); err != nil {
		return Pattern{}, fmt.Errorf("%w: %s pattern: %v", ErrInvalidConfig, name, err)
	}
	return p, nil
}

// Render renders the pattern for a claim.
func (p Pattern) Render(c Claim) (string, error) {
	if p.t == nil {
		return "", nil
	}
	var b strings.Builder
	if err := p.t.Execute(&b, patternData{
		ClaimName: c.Name, Namespace: c.Namespace, ClusterName: c.ClusterName, MachineName: c.MachineName,
	}); err != nil {
		return "", err
	}
	return b.String(), nil
}
