package fidelity

import "testing"

func runHTTPCases(t *testing.T) {}
