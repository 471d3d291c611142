//go:build ignore

// ipamsim runs the provider's IPAM test systems as a process of their own,
// for the CAPV end-to-end test (test/capve2e), which is pinned to CAPV's
// Cluster API and controller-runtime and so cannot import the provider's
// module. It is built from the provider's module (go build
// ./test/capve2e/ipamsim/main.go in the repository root) and serves:
//
//   - NetBox: the simulator (test/netboxsim), or, when NETBOX_URL and the
//     tokens of hack/netbox/up.sh's env file are set, the real NetBox behind
//     test/netboxtarget's proxy;
//   - Infoblox: the WAPI simulator (test/wapisim) over HTTPS.
//
// It prints one JSON line (endpoints) on stdout and then answers a small
// JSON control API on 127.0.0.1 to seed both systems and list their records,
// until its stdin closes.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// endpoints is the line printed on start.
type endpoints struct {
	Control    string `json:"control"`
	NetboxURL  string `json:"netboxURL"`
	NetboxReal bool   `json:"netboxReal"`
	WAPIHost   string `json:"wapiHost"`
	WAPIPort   string `json:"wapiPort"`
	WAPICA     string `json:"wapiCA"`
}

// netboxIP and wapiObject are the records as the control API lists them.
type netboxIP struct {
	Address      string         `json:"address"`
	DNSName      string         `json:"dnsName"`
	Description  string         `json:"description"`
	Status       string         `json:"status"`
	CustomFields map[string]any `json:"customFields"`
}

// netboxPrefix is a prefix as the control API lists it.
type netboxPrefix struct {
	Prefix       string         `json:"prefix"`
	Description  string         `json:"description"`
	CustomFields map[string]any `json:"customFields"`
}

type wapiObject struct {
	Type      string            `json:"type"`
	Name      string            `json:"name"`
	Addresses []string          `json:"addresses"`
	EAs       map[string]string `json:"eas"`
	Comment   string            `json:"comment,omitempty"`
	// MAC and MatchClient of a fixed address.
	MAC         string `json:"mac,omitempty"`
	MatchClient string `json:"matchClient,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ipamsim:", err)
		os.Exit(1)
	}
}

func run() error {
	h := &netboxtarget.Harness{}
	defer h.Close()
	var nb netboxtarget.Target
	if netboxtarget.Real() {
		var err error
		if nb, err = netboxtarget.NewReal(h); err != nil {
			return err
		}
	} else {
		sim := netboxsim.New()
		defer sim.Close()
		nb = sim
	}
	wapi := wapisim.NewTLS()
	defer wapi.Close()

	mux := http.NewServeMux()
	// handle decodes the request into in, runs do, and answers its result;
	// seeding failures (panics from the targets) become HTTP 500.
	handle := func(pattern string, in func() any, do func(any) any) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			var err error
			defer func() {
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
			}()
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("%v", p)
				}
			}()
			defer h.RecoverFatal(&err)
			var arg any
			if in != nil {
				arg = in()
				if err = json.NewDecoder(r.Body).Decode(arg); err != nil {
					return
				}
			}
			out := do(arg)
			w.Header().Set("Content-Type", "application/json")
			err = json.NewEncoder(w).Encode(out)
		})
	}
	type token struct{ Token string }
	type prefix struct{ CIDR string }
	type wapiUser struct{ Name, Password string }
	type network struct{ View, CIDR string }
	type fixed struct{ View, IP string }
	type zone struct{ View, FQDN string }

	handle("POST /netbox/tokens", func() any { return &token{} }, func(a any) any {
		nb.AddToken(a.(*token).Token, true)
		return struct{}{}
	})
	handle("POST /netbox/prefixes", func() any { return &prefix{} }, func(a any) any {
		return nb.AddPrefixWithGateway(a.(*prefix).CIDR, netboxsim.PrefixOptions{})
	})
	// A container prefix that carving pools carve from, and what lies in it.
	handle("POST /netbox/containers", func() any { return &prefix{} }, func(a any) any {
		return nb.AddPrefix(a.(*prefix).CIDR, netboxsim.PrefixOptions{Status: "container"})
	})
	handle("POST /netbox/prefixes-within", func() any { return &prefix{} }, func(a any) any {
		out := []netboxPrefix{}
		for _, p := range nb.PrefixesWithin(a.(*prefix).CIDR) {
			out = append(out, netboxPrefix{Prefix: p.Prefix, Description: p.Description, CustomFields: p.CustomFields})
		}
		return out
	})
	handle("GET /netbox/ip-addresses", nil, func(any) any {
		out := []netboxIP{}
		for _, ip := range nb.IPAddresses() {
			out = append(out, netboxIP{Address: ip.Address, DNSName: ip.DNSName, Description: ip.Description, Status: ip.Status, CustomFields: ip.CustomFields})
		}
		return out
	})
	handle("POST /wapi/users", func() any { return &wapiUser{} }, func(a any) any {
		u := a.(*wapiUser)
		wapi.AddUser(u.Name, u.Password, wapisim.Permissions{Write: true, Superuser: true})
		return struct{}{}
	})
	handle("POST /wapi/networks", func() any { return &network{} }, func(a any) any {
		n := a.(*network)
		return wapi.AddNetwork(n.View, n.CIDR, nil)
	})
	handle("POST /wapi/fixedaddresses", func() any { return &fixed{} }, func(a any) any {
		f := a.(*fixed)
		return wapi.AddFixedAddress(f.View, f.IP, nil)
	})
	handle("POST /wapi/zones", func() any { return &zone{} }, func(a any) any {
		z := a.(*zone)
		return wapi.AddZone(z.View, z.FQDN)
	})
	mux.HandleFunc("GET /wapi/objects", func(w http.ResponseWriter, r *http.Request) {
		out := []wapiObject{}
		for _, o := range wapi.Objects(r.URL.Query().Get("type")) {
			obj := wapiObject{Type: o.Type, Name: o.Name, EAs: o.EAs, Comment: o.Comment, MAC: o.MAC, MatchClient: o.MatchClient}
			for _, a := range o.Addresses {
				obj.Addresses = append(obj.Addresses, a.String())
			}
			out = append(out, obj)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	if err := json.NewEncoder(os.Stdout).Encode(endpoints{
		Control:    "http://" + l.Addr().String(),
		NetboxURL:  nb.URL(),
		NetboxReal: netboxtarget.Real(),
		WAPIHost:   wapi.Host(),
		WAPIPort:   wapi.Port(),
		WAPICA:     string(wapi.CACertPEM()),
	}); err != nil {
		return err
	}
	// Serve until the test closes stdin (or dies).
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}
