// Package eventrecorder records the provider's Events (events.k8s.io/v1)
// in bounded memory.
//
// client-go's recorder keeps every Event it sent in a cache for six to twelve
// minutes, so that a repeat within that time becomes a series (one Event
// with a count) instead of a new Event. That serves Warnings, which a
// failing reconcile repeats; the provider's Normal Events are each about a
// step that happens once (an address allocated, an address released), one
// per claim, and never repeat. In a burst of 10,000 claims the cache held
// 10,000 of them, some 9 MiB, to aggregate nothing.
//
// A Recorder therefore sends Normal Events itself, from a bounded queue and
// without a cache, and passes Warnings to client-go's recorder, which
// aggregates them as before. The Events are the same either way: the same
// fields, name and reporting controller and instance as client-go writes.
package eventrecorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"github.com/go-logr/logr"
)

const (
	// queueLength bounds the Events waiting to be sent, as client-go's
	// broadcaster bounds its own: past it an Event is dropped, and logged.
	queueLength = 1000
	// senders send Events at once. client-go sends each Event from a
	// goroutine of its own; a burst of claims makes one Event each, and a
	// create takes the API server tens of milliseconds when it is busy with
	// the burst's own writes, so that a few senders would fall behind.
	senders = 16
	// maxTries and retryInterval are client-go's: an Event the API server
	// could not take for a reason that may pass (it is unreachable, say) is
	// sent again, up to maxTries times, about retryInterval apart.
	maxTries      = 12
	retryInterval = 10 * time.Second
	// drainTimeout is how long Events still queued when the manager stops
	// may take to be sent.
	drainTimeout = 5 * time.Second
)

// Creator creates an Event: client-go's events.EventSinkImpl does.
type Creator interface {
	Create(ctx context.Context, event *eventsv1.Event) (*eventsv1.Event, error)
}

// Sender sends Normal Events for every Recorder built on it. Start it with
// the manager (it is a manager.Runnable).
type Sender struct {
	creator       Creator
	log           logr.Logger
	queue         chan *eventsv1.Event
	retryInterval time.Duration

	mu      sync.Mutex
	dropped int
}

// NewSender returns a Sender that creates Events with creator, and logs
// each at verbosity 1 to log, as controller-runtime's recorder does.
func NewSender(creator Creator, log logr.Logger) *Sender {
	return &Sender{creator: creator, log: log, queue: make(chan *eventsv1.Event, queueLength), retryInterval: retryInterval}
}

// NeedLeaderElection is false: a manager that is not the leader records no
// Events, and one that stops leading sends those it has queued.
func (s *Sender) NeedLeaderElection() bool { return false }

// Start sends queued Events until ctx ends, then those still queued, for at
// most drainTimeout.
func (s *Sender) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case e := <-s.queue:
					s.send(ctx, e)
				}
			}
		})
	}
	wg.Wait()
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
	defer cancel()
	for {
		select {
		case e := <-s.queue:
			s.send(drain, e)
		default:
			return nil
		}
	}
}

func (s *Sender) enqueue(e *eventsv1.Event) {
	s.log.V(1).Info("Event occurred", "object", klog.KRef(e.Regarding.Namespace, e.Regarding.Name),
		"kind", e.Regarding.Kind, "apiVersion", e.Regarding.APIVersion, "type", e.Type, "reason", e.Reason,
		"action", e.Action, "note", e.Note)
	select {
	case s.queue <- e:
	default:
		s.mu.Lock()
		s.dropped++
		n := s.dropped
		s.mu.Unlock()
		s.log.Error(nil, "Too many Events waiting to be sent, dropping one",
			"reason", e.Reason, "regarding", klog.KRef(e.Regarding.Namespace, e.Regarding.Name), "dropped", n)
	}
}

// send creates the Event, again while the API server's refusal may pass,
// as client-go's recorder does.
func (s *Sender) send(ctx context.Context, e *eventsv1.Event) {
	log := s.log.WithValues("reason", e.Reason, "regarding", klog.KRef(e.Regarding.Namespace, e.Regarding.Name))
	for try := 1; ; try++ {
		_, err := s.creator.Create(ctx, e)
		if err == nil || !mayPass(err) {
			if err != nil && !apierrors.IsAlreadyExists(err) {
				log.Error(err, "Server rejected event (will not retry!)")
			}
			return
		}
		if try >= maxTries {
			log.Error(err, "Unable to write event (retry limit exceeded!)")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.Jitter(s.retryInterval, 0.25)):
		}
	}
}

// mayPass says whether a failed create is worth trying again: not when the
// API server judged the Event, nor when the request could not be built
// (client-go's rule).
func mayPass(err error) bool {
	var status apierrors.APIStatus
	var construction *restclient.RequestConstructionError
	return !errors.As(err, &status) && !errors.As(err, &construction)
}

// Recorder is an events.EventRecorder that sends Normal Events through its
// Sender and Warnings through another recorder.
type Recorder struct {
	sender   *Sender
	warnings events.EventRecorder
	scheme   *runtime.Scheme
	// controller and instance are the Events' reporting controller and
	// instance, as client-go names them.
	controller, instance string
}

var _ events.EventRecorder = &Recorder{}

// NewRecorder returns a recorder of Events reported by controller; warnings
// records the Warnings.
func (s *Sender) NewRecorder(scheme *runtime.Scheme, controller string, warnings events.EventRecorder) *Recorder {
	hostname, _ := os.Hostname()
	return &Recorder{sender: s, warnings: warnings, scheme: scheme, controller: controller, instance: controller + "-" + hostname}
}

// Eventf records an Event about regarding, as client-go's recorder does.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype != corev1.EventTypeNormal {
		r.warnings.Eventf(regarding, related, eventtype, reason, action, note, args...)
		return
	}
	e, err := r.makeEvent(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		r.sender.log.Error(err, "Could not construct reference, will not report event", "eventType", eventtype, "reason", reason)
		return
	}
	r.sender.enqueue(e)
}

func (r *Recorder) makeEvent(regarding, related runtime.Object, eventtype, reason, action, message string) (*eventsv1.Event, error) {
	refRegarding, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		return nil, err
	}
	var refRelated *corev1.ObjectReference
	if related != nil {
		// As client-go: an Event whose related object has no reference
		// is recorded without one.
		refRelated, _ = reference.GetReference(r.scheme, related)
	}
	now := time.Now()
	namespace := refRegarding.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      util.GenerateEventName(refRegarding.Name, now.UnixNano()),
			Namespace: namespace,
		},
		EventTime:           metav1.MicroTime{Time: now},
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *refRegarding,
		Related:             refRelated,
		Note:                message,
		Type:                eventtype,
	}, nil
}
