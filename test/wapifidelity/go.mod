// The WAPI simulator's fidelity cases (test/wapisim/fidelity), run with
// infoblox-go-client v2.11.0 instead of the version the main module pins.
// Minimal version selection picks the main module's newer version (hence
// the v2.12.0 below, which go mod tidy writes); the replace directive
// substitutes v2.11.0 for it, and the test checks which one it linked.
module github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapifidelity

go 1.26.0

require (
	github.com/ipam-bridge/cluster-api-ipam-provider-bridge v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/infobloxopen/infoblox-go-client/v2 v2.12.0 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	go4.org/netipx v0.0.0-20260823151212-3075585bcbeb // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	golang.org/x/time v0.14.0 // indirect
)

replace (
	github.com/infobloxopen/infoblox-go-client/v2 => github.com/infobloxopen/infoblox-go-client/v2 v2.11.0
	github.com/ipam-bridge/cluster-api-ipam-provider-bridge => ../..
)
