// Package endpointpolicy decides which IPAM endpoints the pools that
// namespace editors create may reach.
//
// A namespaced pool names its IPAM system by URL, and anyone who may edit
// the namespace may create one. Without a policy the manager connects, from
// inside the management cluster, to whatever URL a tenant writes: a
// server-side request forgery path into the management cluster's network.
// A cluster administrator lists the endpoints namespaced pools may use; a
// pool naming any other is refused before a connection is made.
package endpointpolicy

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Policy is the endpoints namespaced pools may reach. The zero Policy, and a
// nil one, allow every endpoint: what the manager did before the policy
// existed, kept so that an upgrade breaks no pool.
type Policy struct {
	entries []entry
	// restricted is set once any entry is given.
	restricted bool
}

// entry is one allowed endpoint: a scheme, a host (or, with a leading
// "*.", every host below a domain) and a port.
type entry struct {
	scheme string
	host   string
	// suffix is set for "*.example.com": every host ending in
	// ".example.com".
	suffix bool
	port   string
}

// Parse reads the allowed endpoints, each "scheme://host[:port]": https or
// http, a host name, an IP address or "*.domain", and a port (443 for https
// and 80 for http when left out). A path, user, query or fragment is
// refused, since it would suggest a limit the policy does not enforce. The
// single entry "*" allows every endpoint; no entry at all does too.
func Parse(specs []string) (*Policy, error) {
	p := &Policy{}
	for _, spec := range specs {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		if spec == "*" {
			if len(specs) > 1 {
				return nil, fmt.Errorf("allowed endpoint %q: \"*\" allows every endpoint and cannot be combined with others", spec)
			}
			return &Policy{}, nil
		}
		e, err := parseEntry(spec)
		if err != nil {
			return nil, fmt.Errorf("allowed endpoint %q: %w", spec, err)
		}
		p.entries = append(p.entries, e)
		p.restricted = true
	}
	return p, nil
}

func parseEntry(spec string) (entry, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return entry{}, err
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return entry{}, fmt.Errorf("want https://host[:port] or http://host[:port]")
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return entry{}, fmt.Errorf("only a scheme, a host and a port may be given")
	case u.Hostname() == "":
		return entry{}, fmt.Errorf("no host")
	}
	if strings.Contains(u.Host, "%") {
		return entry{}, fmt.Errorf("a host may not name an IPv6 zone or be percent-encoded")
	}
	e := entry{scheme: u.Scheme, host: strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port: portOf(u)}
	if rest, ok := strings.CutPrefix(e.host, "*."); ok {
		if rest == "" || strings.Contains(rest, "*") {
			return entry{}, fmt.Errorf("a wildcard must be the first label of a domain, as in *.example.com")
		}
		e.host, e.suffix = "."+rest, true
	} else if strings.Contains(e.host, "*") {
		return entry{}, fmt.Errorf("a wildcard must be the first label of a domain, as in *.example.com")
	} else if ip := net.ParseIP(e.host); ip != nil {
		// One spelling per address, as Allows spells the endpoint's.
		e.host = ip.String()
	}
	return e, nil
}

// portOf is the URL's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "http" {
		return "80"
	}
	return "443"
}

// Restricted says whether the policy refuses any endpoint.
func (p *Policy) Restricted() bool { return p != nil && p.restricted }

// Allows says whether a pool may reach endpoint, a URL as the pool gives it.
// A URL that does not parse is never allowed by a restricted policy.
func (p *Policy) Allows(endpoint string) bool {
	if !p.Restricted() {
		return true
	}
	u, err := url.Parse(strings.TrimSpace(endpoint))
	// A zone (%25 in a URL) is dropped or resolved when the connection is
	// made, so the host compared would not be the one dialled: refused.
	if err != nil || u.Hostname() == "" || strings.Contains(u.Host, "%") {
		return false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), portOf(u)
	ip := net.ParseIP(host)
	if ip != nil {
		// One spelling per address: ::ffff:10.0.0.1 is 10.0.0.1.
		host = ip.String()
	}
	for _, e := range p.entries {
		if e.scheme != scheme || e.port != port {
			continue
		}
		// A domain's wildcard covers host names, never an IP address.
		if e.suffix && ip == nil && strings.HasSuffix(host, e.host) || !e.suffix && e.host == host {
			return true
		}
	}
	return false
}

// Describe is an endpoint as a message may name it: scheme, host and port,
// never a user, password or path that the URL may hold.
func Describe(endpoint string) string {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || u.Hostname() == "" {
		return "an endpoint that is no URL"
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), portOf(u))
}

// String lists the allowed endpoints as Parse reads them.
func (p *Policy) String() string {
	if !p.Restricted() {
		return "*"
	}
	out := make([]string, 0, len(p.entries))
	for _, e := range p.entries {
		host := e.host
		if e.suffix {
			host = "*" + host
		}
		out = append(out, e.scheme+"://"+net.JoinHostPort(host, e.port))
	}
	return strings.Join(out, ",")
}
