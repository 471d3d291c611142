package poolstate

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// wakeQueue is how many wake-ups may wait for a reconciler; one beyond it
// is dropped, and the pool's next reconcile reads what it was about.
const wakeQueue = 256

// poolWake wakes one reconciler per pool kind for a pool, through a
// channel source it watches.
type poolWake struct {
	mu       sync.Mutex
	channels map[string]chan event.GenericEvent
}

func (w *poolWake) notify(kind poolkind.Kind, pool poolkind.Pool) {
	select {
	case w.channel(kind) <- event.GenericEvent{Object: pool}:
	default:
	}
}

func (w *poolWake) source(kind poolkind.Kind) source.Source {
	return source.Channel(w.channel(kind), &handler.EnqueueRequestForObject{})
}

func (w *poolWake) channel(kind poolkind.Kind) chan event.GenericEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.channels[kind.Kind]
	if !ok {
		if w.channels == nil {
			w.channels = map[string]chan event.GenericEvent{}
		}
		ch = make(chan event.GenericEvent, wakeQueue)
		w.channels[kind.Kind] = ch
	}
	return ch
}
