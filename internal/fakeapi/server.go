// Package fakeapi is the API server the exercises' unit tests run
// demo-controller against: a small kube-apiserver over HTTP that keeps
// objects as JSON maps, lists and watches them as kube-apiserver's watch
// cache does (label selectors, resuming from a resourceVersion, 410 Gone),
// and records every request. Each exercise's test answers the writes its
// task is about (Server.Write), and judges them; the rest is here.
//
// Only tests import it.
package fakeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kinds names what each resource this package knows holds: its kind and
// apiVersion, as a kube-apiserver with the Greeting CRD serves them.
var Kinds = map[string]schema.GroupVersionKind{
	"pods":       {Version: "v1", Kind: "Pod"},
	"configmaps": {Version: "v1", Kind: "ConfigMap"},
	"namespaces": {Version: "v1", Kind: "Namespace"},
	"nodes":      {Version: "v1", Kind: "Node"},
	"greetings":  {Group: "demo.example.com", Version: "v1alpha1", Kind: "Greeting"},
	"events":     {Group: "events.k8s.io", Version: "v1", Kind: "Event"},
}

// Request is one request to the server, and its answer's status code.
type Request struct {
	Verb        string // get, list, watch, create, update, patch, apply, delete
	Resource    string
	Namespace   string
	Name        string // for a create, the name in the body
	Subresource string // status, for example
	Query       url.Values
	ContentType string
	Body        []byte
	Code        int
	Note        string // what the exercise's Write says of it (the Greeting it is for, say)
}

// Key is the request's object's "namespace/name".
func (r *Request) Key() string { return r.Namespace + "/" + r.Name }

// GroupResource is the request's resource, with its API group.
func (r *Request) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: Kinds[r.Resource].Group, Resource: r.Resource}
}

// Event is one change of the store, as a watch sends it.
type Event struct {
	Resource string
	RV       int
	Old, Obj map[string]any // nil: none (created), or deleted
}

// Server is the API server. Its fields and methods ending in Locked need
// its lock held (Lock), as Write has it.
type Server struct {
	URL string

	// Write answers every request but a get, list or watch, with the lock
	// held: a status code, and the object or Status to send. nil: 405.
	Write func(r *Request) (int, any)
	// Filter, if set, is called first for every request, with the lock held;
	// when it returns a code, that is the answer (a list or watch refused).
	Filter func(r *Request) (int, any)

	sync.Mutex
	cond     *sync.Cond
	rv       int
	objects  map[string]map[string]map[string]any // resource, "namespace/name", object
	log      []Event
	requests []Request
	problems []string
	held     map[string]int           // resource: its events after this resourceVersion wait
	gone     map[string]int           // resource: a watch from before this resourceVersion gets 410 Gone
	expired  map[string]bool          // resource: its next watch gets 410 Gone
	epoch    map[string]int           // resource: bumped to end its open watches
	delay    map[string]time.Duration // resource: each list of it answers this late
	open     int                      // requests not answered yet, watches apart
	watches  map[string]int           // resource: watches open
	closed   bool
}

// New starts a server that serves the resources named (of Kinds), until the
// test ends.
func New(t testing.TB, resources ...string) *Server {
	s := &Server{objects: map[string]map[string]map[string]any{}, held: map[string]int{}, gone: map[string]int{}, expired: map[string]bool{},
		epoch: map[string]int{}, delay: map[string]time.Duration{}, watches: map[string]int{}}
	for _, r := range resources {
		if _, ok := Kinds[r]; !ok {
			t.Fatalf("fakeapi: no kind known for %s", r)
		}
		s.objects[r] = map[string]map[string]any{}
	}
	s.cond = sync.NewCond(&s.Mutex)
	server := httptest.NewServer(s)
	t.Cleanup(func() { s.Lock(); s.closed = true; s.cond.Broadcast(); s.Unlock(); server.Close() })
	s.URL = server.URL
	return s
}

// path matches a resource's path: its group and version (core: api/v1),
// namespace, resource, name and subresource.
var path = regexp.MustCompile(`^/(api/v1|apis/[^/]+/[^/]+)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?(?:/([^/]+))?$`)

func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	m := path.FindStringSubmatch(hr.URL.Path)
	if m != nil && !ownPath(m[1], m[3]) {
		m = nil // a resource at another group or version than its own: not served
	}
	if m == nil {
		WriteStatus(w, apierrors.NewNotFound(schema.GroupResource{}, hr.URL.Path))
		return
	}
	r := &Request{Resource: m[3], Namespace: m[2], Name: m[4], Subresource: m[5], Query: hr.URL.Query(),
		ContentType: hr.Header.Get("Content-Type")}
	r.Body, _ = io.ReadAll(hr.Body)
	r.Verb = map[string]string{"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[hr.Method]
	switch {
	case hr.Method == "GET" && r.Name == "" && (r.Query.Get("watch") == "true" || r.Query.Get("watch") == "1"):
		r.Verb = "watch"
	case hr.Method == "GET" && r.Name == "":
		r.Verb = "list"
	case r.ContentType == "application/apply-patch+yaml":
		r.Verb = "apply"
	case r.Verb == "create":
		if obj, err := Decode(r.Body); err == nil {
			r.Name = Meta(obj, "name")
		}
	}
	s.Lock()
	s.open++
	code, answer := s.serve(r)
	r.Code = code
	if r.Verb == "watch" && code == 0 {
		r.Code = http.StatusOK
		s.watches[r.Resource]++
		s.open--
	}
	s.requests = append(s.requests, *r)
	delay := s.delay[r.Resource]
	s.Unlock()
	if code == 0 {
		s.watch(w, hr, r)
		return
	}
	defer func() { s.Lock(); s.open--; s.cond.Broadcast(); s.Unlock() }()
	if r.Verb == "list" && delay > 0 {
		time.Sleep(delay) // the list comes late: a controller that does not wait for it acts on an empty cache
	}
	Write(w, code, answer)
}

// ownPath says whether a resource of Kinds is served at groupVersion, as
// path matches it ("api/v1", "apis/demo.example.com/v1alpha1").
func ownPath(groupVersion, resource string) bool {
	gvk, ok := Kinds[resource]
	if gvk.Group == "" {
		return ok && groupVersion == "api/"+gvk.Version
	}
	return ok && groupVersion == "apis/"+gvk.GroupVersion().String()
}

// serve answers r, with the lock held; 0 starts a watch.
func (s *Server) serve(r *Request) (int, any) {
	if s.Filter != nil {
		if code, answer := s.Filter(r); code != 0 {
			return code, answer
		}
	}
	objects := s.objects[r.Resource]
	switch {
	case objects == nil && r.Verb != "create":
		return Status(apierrors.NewNotFound(r.GroupResource(), r.Name))
	case r.Verb == "get" && r.Subresource == "":
		if obj := objects[r.Key()]; obj != nil {
			return http.StatusOK, obj
		}
		return Status(apierrors.NewNotFound(r.GroupResource(), r.Name))
	case r.Verb == "list":
		selector, err := labels.Parse(r.Query.Get("labelSelector"))
		if err != nil {
			return Status(apierrors.NewBadRequest(err.Error()))
		}
		items := []any{}
		for _, k := range slices.Sorted(maps.Keys(objects)) {
			if obj := objects[k]; Matches(obj, r.Namespace, selector) {
				items = append(items, obj)
			}
		}
		gvk := Kinds[r.Resource]
		return http.StatusOK, map[string]any{"kind": gvk.Kind + "List", "apiVersion": gvk.GroupVersion().String(),
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(s.rv)}, "items": items}
	case r.Verb == "watch" && r.Query.Get("sendInitialEvents") == "true":
		return Status(apierrors.NewBadRequest("sendInitialEvents is not supported here")) // client-go lists instead
	case r.Verb == "watch":
		if _, err := labels.Parse(r.Query.Get("labelSelector")); err != nil {
			return Status(apierrors.NewBadRequest(err.Error()))
		}
		if from, _ := strconv.Atoi(r.Query.Get("resourceVersion")); from < s.gone[r.Resource] || s.expired[r.Resource] {
			delete(s.expired, r.Resource)
			return Status(apierrors.NewResourceExpired("too old resource version"))
		}
		return 0, nil
	case s.Write == nil:
		return Status(apierrors.NewMethodNotSupported(r.GroupResource(), r.Verb))
	}
	return s.Write(r)
}

// Matches says whether obj is in namespace ("": any) and selector.
func Matches(obj map[string]any, namespace string, selector labels.Selector) bool {
	return obj != nil && (namespace == "" || Meta(obj, "namespace") == namespace) && selector.Matches(labels.Set(Labels(obj)))
}

// watch streams the changes of r's resource after the resourceVersion r
// asks for, as kube-apiserver's watch cache does for a label selector
// (cache_watcher.go, convertToWatchEvent): an object that starts to match
// is ADDED, one that stops matching is DELETED (its last state, at the new
// resourceVersion), and one that matches neither before nor after is not
// sent. Events held back wait.
func (s *Server) watch(w http.ResponseWriter, hr *http.Request, r *Request) {
	selector, _ := labels.Parse(r.Query.Get("labelSelector"))
	from, _ := strconv.Atoi(r.Query.Get("resourceVersion"))
	s.Lock()
	epoch, next := s.epoch[r.Resource], 0
	s.Unlock()
	defer func() { s.Lock(); s.watches[r.Resource]--; s.cond.Broadcast(); s.Unlock() }()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	stop := context.AfterFunc(hr.Context(), func() { s.Lock(); s.cond.Broadcast(); s.Unlock() })
	defer stop()
	for {
		s.Lock()
		var send []byte
		for send == nil {
			if hr.Context().Err() != nil || s.closed || s.epoch[r.Resource] != epoch {
				s.Unlock()
				return
			}
			if next >= len(s.log) || s.log[next].Resource == r.Resource && s.isHeld(s.log[next]) {
				s.cond.Wait()
				continue
			}
			e := s.log[next]
			next++
			if e.Resource != r.Resource || e.RV <= from {
				continue
			}
			typ, obj := "", e.Obj
			switch now, before := Matches(e.Obj, r.Namespace, selector), Matches(e.Old, r.Namespace, selector); {
			case now && before:
				typ = "MODIFIED"
			case now:
				typ = "ADDED"
			case before:
				typ, obj = "DELETED", Copy(e.Old)
				SetMeta(obj, "resourceVersion", strconv.Itoa(e.RV))
			default:
				continue
			}
			send, _ = json.Marshal(map[string]any{"type": typ, "object": obj})
		}
		s.Unlock()
		if _, err := w.Write(append(send, '\n')); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

func (s *Server) isHeld(e Event) bool {
	from, ok := s.held[e.Resource]
	return ok && e.RV > from
}

// StoreLocked writes obj (its namespace and name set) at a new
// resourceVersion, with its kind and apiVersion, and sends its event.
func (s *Server) StoreLocked(resource string, obj map[string]any) {
	key := Meta(obj, "namespace") + "/" + Meta(obj, "name")
	old := s.objects[resource][key]
	s.rv++
	SetMeta(obj, "resourceVersion", strconv.Itoa(s.rv))
	gvk := Kinds[resource]
	obj["kind"], obj["apiVersion"] = gvk.Kind, gvk.GroupVersion().String()
	s.objects[resource][key] = obj
	s.log = append(s.log, Event{resource, s.rv, old, obj})
	s.cond.Broadcast()
}

// Store is StoreLocked, for the test's own writes.
func (s *Server) Store(resource string, obj map[string]any) {
	s.Lock()
	defer s.Unlock()
	s.StoreLocked(resource, obj)
}

// RemoveLocked deletes an object, at a new resourceVersion, and sends its
// event; it returns what it was (nil: there was none).
func (s *Server) RemoveLocked(resource, namespace, name string) map[string]any {
	old := s.objects[resource][namespace+"/"+name]
	if old == nil {
		return nil
	}
	delete(s.objects[resource], namespace+"/"+name)
	s.rv++
	s.log = append(s.log, Event{resource, s.rv, old, nil})
	s.cond.Broadcast()
	return old
}

// Remove is RemoveLocked, for the test's own deletes.
func (s *Server) Remove(resource, namespace, name string) map[string]any {
	s.Lock()
	defer s.Unlock()
	return s.RemoveLocked(resource, namespace, name)
}

// ObjectLocked returns the object stored under "namespace/name" (nil: none).
// It is the store's own: copy it to change it.
func (s *Server) ObjectLocked(resource, key string) map[string]any { return s.objects[resource][key] }

// Object is ObjectLocked, for the test: a copy.
func (s *Server) Object(resource, key string) map[string]any {
	s.Lock()
	defer s.Unlock()
	if obj := s.objects[resource][key]; obj != nil {
		return Copy(obj)
	}
	return nil
}

// ObjectsLocked returns the objects of a resource, by "namespace/name".
func (s *Server) ObjectsLocked(resource string) map[string]map[string]any { return s.objects[resource] }

// Change stores a changed copy of an object, as kubectl edit would: change
// is handed the copy.
func (s *Server) Change(resource, key string, change func(obj map[string]any)) {
	s.Lock()
	defer s.Unlock()
	obj := Copy(s.objects[resource][key])
	change(obj)
	s.StoreLocked(resource, obj)
}

// RV is the resourceVersion of the last change.
func (s *Server) RV() int { s.Lock(); defer s.Unlock(); return s.rv }

// JumpRV moves the resourceVersion on, as other writes to the cluster do.
func (s *Server) JumpRV(to int) { s.Lock(); defer s.Unlock(); s.rv = max(s.rv, to) }

// Hold holds back the watch events of a resource from now on; Release
// sends them.
func (s *Server) Hold(resource string) { s.Lock(); defer s.Unlock(); s.held[resource] = s.rv }

// HoldAfter holds back the watch events of a resource after resourceVersion
// rv, those to come included; Release sends them.
func (s *Server) HoldAfter(resource string, rv int) {
	s.Lock()
	defer s.Unlock()
	s.held[resource] = rv
}

// Release sends the events of a resource held back, and sends the next at once.
func (s *Server) Release(resource string) {
	s.Lock()
	defer s.Unlock()
	delete(s.held, resource)
	s.cond.Broadcast()
}

// Expire ends the watches of each resource named; the next watch, and any
// from before now, gets 410 Gone, so the informer lists again. Events held
// back are never sent: the list has what they said.
func (s *Server) Expire(resources ...string) {
	s.Lock()
	defer s.Unlock()
	for _, r := range resources {
		s.gone[r], s.expired[r] = s.rv, true
		s.epoch[r]++
		delete(s.held, r)
	}
	s.cond.Broadcast()
}

// DelayLists makes each list of a resource answer d late.
func (s *Server) DelayLists(resource string, d time.Duration) {
	s.Lock()
	defer s.Unlock()
	s.delay[resource] = d
}

// Watching returns how many watches of a resource are open.
func (s *Server) Watching(resource string) int {
	s.Lock()
	defer s.Unlock()
	return s.watches[resource]
}

// RequestsLocked returns the requests since mark (an index: Mark).
func (s *Server) RequestsLocked(mark int) []Request {
	return slices.Clone(s.requests[min(mark, len(s.requests)):])
}

// Requests is RequestsLocked, for the test.
func (s *Server) Requests(mark int) []Request {
	s.Lock()
	defer s.Unlock()
	return s.RequestsLocked(mark)
}

// Mark is the number of requests so far.
func (s *Server) Mark() int { s.Lock(); defer s.Unlock(); return len(s.requests) }

// Open is the number of requests not answered yet, watches apart.
func (s *Server) Open() int { s.Lock(); defer s.Unlock(); return s.open }

// ProblemLocked records what the controller did that the task rules out
// (a run of 40 letters or more shortened); Check fails the test with the
// first.
func (s *Server) ProblemLocked(p string) {
	s.problems = append(s.problems, long.ReplaceAllString(p, "aaaa…"))
}

var long = regexp.MustCompile(`a{40,}`)

// Check fails the test with the first problem recorded.
func (s *Server) Check(t testing.TB) {
	t.Helper()
	s.Lock()
	defer s.Unlock()
	if len(s.problems) > 0 {
		t.Fatal(s.problems[0])
	}
}

// Settle waits until the controller has sent no request for quiet, and
// has none open but its watches; it returns false if that did not happen
// within wait.
func (s *Server) Settle(quiet, wait time.Duration) bool {
	last, since := -1, time.Now()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.Lock()
		n, busy := len(s.requests), s.open > 0
		s.Unlock()
		if n != last || busy {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return true
		}
	}
	return false
}

// LastRequests says the last n requests, one a line.
func (s *Server) LastRequests(n int) string {
	s.Lock()
	defer s.Unlock()
	var lines []string
	for _, r := range s.requests[max(0, len(s.requests)-n):] {
		lines = append(lines, fmt.Sprintf("%s %s %s (%d)", r.Verb, r.Resource, r.Key(), r.Code))
	}
	return "the last requests:\n  " + strings.Join(lines, "\n  ")
}

// RVLocked is RV, with the lock held.
func (s *Server) RVLocked() int { return s.rv }
