package netboxtarget

import (
	"fmt"
	"os"
	"testing"
)

// Harness lets a program outside `go test` (the chaos run, the bench) use
// the targets, whose seeding reports failures through a testing.TB:
// Fatalf panics with an error that RecoverFatal turns back into one. Only
// the methods the targets call are implemented; the embedded nil TB
// supplies the unexported method.
type Harness struct {
	testing.TB
	cleanups []func()
}

type harnessFatal struct{ msg string }

func (h *Harness) Helper()                        {}
func (h *Harness) Cleanup(f func())               { h.cleanups = append(h.cleanups, f) }
func (h *Harness) Fatalf(format string, a ...any) { panic(harnessFatal{fmt.Sprintf(format, a...)}) }
func (h *Harness) Fatal(a ...any)                 { panic(harnessFatal{fmt.Sprint(a...)}) }
func (h *Harness) Errorf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
func (h *Harness) Logf(format string, a ...any)   { fmt.Fprintf(os.Stderr, format+"\n", a...) }

// Close runs the cleanups registered so far, last first.
func (h *Harness) Close() {
	for i := len(h.cleanups) - 1; i >= 0; i-- {
		h.cleanups[i]()
	}
	h.cleanups = nil
}

// RecoverFatal, deferred, turns a Fatalf panic into *err.
func (h *Harness) RecoverFatal(err *error) {
	if r := recover(); r != nil {
		f, ok := r.(harnessFatal)
		if !ok {
			panic(r)
		}
		*err = fmt.Errorf("%s", f.msg)
	}
}

// NewReal returns the real NetBox named by NETBOX_URL (and the tokens of
// the env file hack/netbox/up.sh prints) behind the counting proxy, for a
// harness; Close on h closes it.
func NewReal(h *Harness) (t Target, err error) {
	if !Real() {
		return nil, fmt.Errorf("a real NetBox needs NETBOX_URL and the tokens: source the env file hack/netbox/up.sh prints")
	}
	defer h.RecoverFatal(&err)
	return New(h), nil
}
