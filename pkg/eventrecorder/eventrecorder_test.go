package eventrecorder

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// creator records the Events created, failing the first failures calls
// with err.
type creator struct {
	mu       sync.Mutex
	created  []*eventsv1.Event
	calls    int
	failures int
	err      error
}

func (c *creator) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls <= c.failures {
		return nil, c.err
	}
	c.created = append(c.created, e)
	return e, nil
}

func (c *creator) state() (int, []*eventsv1.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, append([]*eventsv1.Event(nil), c.created...)
}

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
}

func start(t *testing.T, s *Sender) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNormalEventsAreSentAsClientGoWritesThem(t *testing.T) {
	c := &creator{}
	s := NewSender(c, logr.Discard())
	start(t, s)
	warnings := events.NewFakeRecorder(10)
	r := s.NewRecorder(testScheme(t), "ipam-bridge-claim-controller", warnings)

	r.Eventf(configMap("ns", "claim"), configMap("ns", "pool"), corev1.EventTypeNormal, "AddressAllocated", "Allocate", "Allocated %s", "10.0.0.2/24")

	waitFor(t, "the Event", func() bool { _, created := c.state(); return len(created) == 1 })
	_, created := c.state()
	e := created[0]
	if e.Namespace != "ns" || !strings.HasPrefix(e.Name, "claim.") || e.Type != corev1.EventTypeNormal ||
		e.Reason != "AddressAllocated" || e.Action != "Allocate" || e.Note != "Allocated 10.0.0.2/24" ||
		e.ReportingController != "ipam-bridge-claim-controller" || !strings.HasPrefix(e.ReportingInstance, "ipam-bridge-claim-controller-") ||
		e.Regarding.Kind != "ConfigMap" || e.Regarding.Name != "claim" || e.Regarding.UID != "uid-claim" ||
		e.Related == nil || e.Related.Name != "pool" || e.EventTime.IsZero() || e.Series != nil {
		t.Errorf("Event: %+v", e)
	}
	if len(warnings.Events) != 0 {
		t.Errorf("a Normal Event went to the Warnings' recorder")
	}
}

func TestWarningsGoThroughTheAggregatingRecorder(t *testing.T) {
	c := &creator{}
	s := NewSender(c, logr.Discard())
	warnings := events.NewFakeRecorder(10)
	r := s.NewRecorder(testScheme(t), "ipam-bridge-claim-controller", warnings)

	r.Eventf(configMap("ns", "claim"), nil, corev1.EventTypeWarning, "ReleaseFailed", "Release", "failed: %v", "timeout")

	select {
	case got := <-warnings.Events:
		if got != "Warning ReleaseFailed failed: timeout" {
			t.Errorf("warning recorded as %q", got)
		}
	default:
		t.Fatal("the Warning did not reach the aggregating recorder")
	}
	if len(s.queue) != 0 {
		t.Error("the Warning was queued too")
	}
}

func TestAnEventIsSentAgainWhileTheFailureMayPass(t *testing.T) {
	c := &creator{failures: 2, err: errors.New("connection refused")}
	s := NewSender(c, logr.Discard())
	s.retryInterval = time.Millisecond
	start(t, s)
	r := s.NewRecorder(testScheme(t), "c", events.NewFakeRecorder(1))

	r.Eventf(configMap("ns", "a"), nil, corev1.EventTypeNormal, "R", "A", "note")

	waitFor(t, "the Event", func() bool { _, created := c.state(); return len(created) == 1 })
	if calls, _ := c.state(); calls != 3 {
		t.Errorf("%d creates, want 3", calls)
	}
}

func TestAnEventTheServerRefusesIsNotSentAgain(t *testing.T) {
	gr := schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	c := &creator{failures: 1, err: apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Event"}, "a", nil)}
	s := NewSender(c, logr.Discard())
	s.retryInterval = time.Millisecond
	start(t, s)
	r := s.NewRecorder(testScheme(t), "c", events.NewFakeRecorder(1))

	// Senders run at once: either Event may be the one refused.
	r.Eventf(configMap("ns", "a"), nil, corev1.EventTypeNormal, "R", "A", "first")
	r.Eventf(configMap("ns", "b"), nil, corev1.EventTypeNormal, "R", "A", "second")

	waitFor(t, "the other Event", func() bool { _, created := c.state(); return len(created) == 1 })
	time.Sleep(20 * time.Millisecond)
	if calls, created := c.state(); calls != 2 || len(created) != 1 {
		t.Errorf("%d creates, %d created; want one refused once and the other created", calls, len(created))
	}
}

func TestTheQueueIsBounded(t *testing.T) {
	c := &creator{}
	s := NewSender(c, logr.Discard()) // not started: nothing leaves the queue
	r := s.NewRecorder(testScheme(t), "c", events.NewFakeRecorder(1))
	for range queueLength + 10 {
		r.Eventf(configMap("ns", "a"), nil, corev1.EventTypeNormal, "R", "A", "note")
	}
	if len(s.queue) != queueLength || s.dropped != 10 {
		t.Errorf("%d queued, %d dropped; want %d and 10", len(s.queue), s.dropped, queueLength)
	}
}

func TestQueuedEventsAreSentWhenTheManagerStops(t *testing.T) {
	c := &creator{}
	s := NewSender(c, logr.Discard())
	r := s.NewRecorder(testScheme(t), "c", events.NewFakeRecorder(1))
	for range 5 {
		r.Eventf(configMap("ns", "a"), nil, corev1.EventTypeNormal, "R", "A", "note")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, created := c.state(); len(created) != 5 {
		t.Errorf("%d of 5 queued Events sent", len(created))
	}
}
