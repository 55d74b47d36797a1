//go:build exercise

// The test of exercise 6 (exercises/06-replicas/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

const (
	leaseNamespace = "team-a" // the kubeconfig context's namespace: where the Lease goes
	watched        = "shop"   // the namespace whose pods the replicas watch (--namespace)
	leaseFor       = 3 * time.Second
)

// Replicas of run, in one process, against one small API server (leaseAPI,
// below) that holds the pods and the Lease and notes who asks for what. Each
// replica has its own POD_NAME, credentials and log; the logs and the
// Lease's changes of holder go, in order, into one journal. One replica at a
// time works; one that loses its Lease stops at once; one stopped as by
// SIGTERM stops working, then releases the Lease, and the next takes over
// at once.
func TestExercise06Replicas(t *testing.T) {
	t.Setenv("LEASE_DURATION", leaseFor.String()) // so that renewing every 0.4 s, giving up after 2 s
	api := newLeaseAPI(t, "web-1", "web-2")

	// replica-a starts alone: it takes the Lease, and works.
	a := api.start(t, "replica-a")
	api.waitFor(t, "replica-a to take the Lease, or to report a pod", func() bool { return api.holder() != "" || a.logged(`"Pod found"`) })
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 2*time.Second, true,
		func(context.Context) (bool, error) { return api.holder() != "", nil })
	api.checkLease(t, a)
	api.waitFor(t, `replica-a to report "Pod found" pod="shop/web-1"`, func() bool { return a.logged(`"Pod found" pod="shop/web-1"`) })

	// replica-b starts: it waits for the Lease, and does nothing else.
	b := api.start(t, "replica-b")
	api.waitForTries(t, b, 3)
	api.checkIdle(t, b, a)
	api.addPod("during-a")
	api.waitFor(t, `replica-a to report "Pod created" pod="shop/during-a"`, func() bool { return a.logged(`"Pod created" pod="shop/during-a"`) })
	api.checkIdle(t, b, a)

	// replica-a is cut off from the Lease (not from the pods): it cannot
	// renew, so it must stop working before replica-b may take over.
	api.cutOff("replica-a")
	lost := time.Now()
	api.waitFor(t, fmt.Sprintf(`replica-b to take over, and report "Pod found" pod="shop/during-a" (with LEASE_DURATION=%v, `+
		`a Lease not renewed for that long may be taken)`, leaseFor), func() bool { return b.logged(`"Pod found" pod="shop/during-a"`) })
	t.Logf("replica-b took over %v after replica-a stopped renewing the Lease (lease duration %v)", time.Since(lost).Round(10*time.Millisecond), leaseFor)
	if !a.logged(`"Worker stopped"`) {
		t.Fatalf("replica-a lost the Lease (it could not renew it for %v) and its controller went on working: when the Lease is lost, "+
			"the controller must stop at once (its worker never logged \"Worker stopped\"), before another replica may take over. The journal:\n%s",
			leaseFor*2/3, api.journal.tail(20))
	}
	api.addPod("during-b")
	api.waitFor(t, `replica-b to report "Pod created" pod="shop/during-b"`, func() bool { return b.logged(`"Pod created" pod="shop/during-b"`) })
	if a.logged(`"Pod created" pod="shop/during-b"`) {
		t.Fatalf("replica-a reported a pod created after it had lost the Lease: a replica that loses its Lease must stop working at once. The journal:\n%s", api.journal.tail(20))
	}

	// replica-c waits; replica-b is stopped as SIGTERM stops it.
	c := api.start(t, "replica-c")
	api.waitForTries(t, c, 2)
	api.checkIdle(t, c, b)
	stopped := time.Now()
	b.cancel()
	select {
	case <-b.done:
		if b.err != nil {
			t.Fatalf("replica-b's run returned %q when its context ended (as on SIGTERM): want nil, a clean stop", b.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("replica-b's run did not return within 5 s of its context ending (as on SIGTERM): the leader election " +
			"must end with it (a context that is never cancelled keeps it running, and the Lease held)")
	}
	if holder := api.holder(); holder == "replica-b" {
		t.Fatalf("replica-b stopped (as on SIGTERM) and left the Lease held in its name: it must release it (ReleaseOnCancel), " +
			"or the next replica waits out the whole lease duration")
	}
	api.waitFor(t, `replica-c to take over, and report "Pod found" pod="shop/during-b"`, func() bool { return c.logged(`"Pod found" pod="shop/during-b"`) })
	took := time.Since(stopped)
	t.Logf("replica-c took over %v after replica-b was stopped (lease duration %v)", took.Round(10*time.Millisecond), leaseFor)
	if took > leaseFor*2/3 {
		t.Errorf("replica-c took %v to take over from a replica that released the Lease: it should at its next try, every %v or so", took, leaseFor*2/15)
	}
	api.checkOneAtATime(t)
}

// checkLease fails unless the only Lease is demo-controller, in the
// kubeconfig context's namespace, held by r under the name POD_NAME gave it.
func (s *leaseAPI) checkLease(t *testing.T, r *replica) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var where []string
	for key := range s.leases {
		where = append(where, key)
	}
	want := leaseNamespace + "/demo-controller"
	switch {
	case len(where) == 0:
		t.Fatalf("%s runs the controller and took no Lease: with POD_NAME set, run must first win a leader election "+
			"(client-go's leaderelection, with a resourcelock.LeaseLock), and run the controller only while it leads", r.name)
	case len(where) > 1 || where[0] != want:
		t.Fatalf("the replicas use the Lease %s; want %s: the Lease demo-controller, in the namespace kubectl would use "+
			"(here the kubeconfig context's, %s; in a pod, the pod's own), not the namespace of the pods watched (%s)",
			strings.Join(where, ", "), want, leaseNamespace, watched)
	}
	for _, e := range s.journal.all() {
		if e.who == "api" {
			break // the Lease was taken
		}
		if e.who == r.name && (strings.HasPrefix(e.line, `"Pod `) || strings.HasPrefix(e.line, `"Starting demo-controller"`)) {
			t.Fatalf("%s ran the controller before it held the Lease: a replica must run it only once it leads (in OnStartedLeading). The journal:\n%s",
				r.name, s.journal.tail(20))
		}
	}
	if holder := ptrValue(s.leases[want].Spec.HolderIdentity); holder != r.name {
		t.Fatalf("the Lease's holder is %q; want %q, the name POD_NAME gives the replica (in a pod, its own name): "+
			"the replicas' identities must differ, and say which pod leads", holder, r.name)
	}
}

// checkIdle fails if r, which waits for the Lease that leader holds, works
// or watches pods; or if it writes the Lease under leader's name.
func (s *leaseAPI) checkIdle(t *testing.T, r, leader *replica) {
	t.Helper()
	s.mu.Lock()
	same := s.wrote[r.name] != "" && s.wrote[r.name] == s.wrote[leader.name]
	informer := s.informers[r.name]
	s.mu.Unlock()
	switch {
	case same:
		t.Fatalf("%s and %s both hold the Lease as %q: each replica must take part under its own name, its POD_NAME", r.name, leader.name, s.wrote[r.name])
	case r.logged(`"Pod `), r.logged(`"Starting demo-controller"`):
		t.Fatalf("%s runs the controller while %s holds the Lease: a replica must run it only once it leads (in OnStartedLeading). Its log:\n%s",
			r.name, leader.name, r.tail(10))
	case informer:
		t.Fatalf("%s lists and watches pods as an informer does while %s holds the Lease: the task is that only the leader runs "+
			"the controller, its informer included (in OnStartedLeading): a standby holds no cache and no watch", r.name, leader.name)
	}
}

// checkOneAtATime fails unless the replicas' times at work, each from its
// "Cache synced" to its "Worker stopped", never overlap.
func (s *leaseAPI) checkOneAtATime(t *testing.T) {
	t.Helper()
	working := ""
	for _, e := range s.journal.all() {
		switch {
		case strings.HasPrefix(e.line, `"Cache synced`) && working != "":
			t.Fatalf("%s started working while %s still worked. The journal:\n%s", e.who, working, s.journal.tail(30))
		case strings.HasPrefix(e.line, `"Cache synced`):
			working = e.who
		case strings.HasPrefix(e.line, `"Worker stopped"`) && e.who == working:
			working = ""
		case (strings.HasPrefix(e.line, `"Pod `) || strings.HasPrefix(e.line, `"Container `)) && e.who != working:
			t.Fatalf("%s reported a pod while %s was the one at work. The journal:\n%s", e.who, working, s.journal.tail(30))
		}
	}
}

// The manifest runs two replicas, names each after its pod, updates them
// one at a time with a standby always there, and lets them use the Lease in
// their namespace, and no other.
func TestExercise06Manifest(t *testing.T) {
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var deployment *appsv1.Deployment
	var roles []*rbacv1.Role
	var bindings []*rbacv1.RoleBinding
	var clusterRoles []*rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			deployment = o
		case *rbacv1.Role:
			roles = append(roles, o)
		case *rbacv1.RoleBinding:
			bindings = append(bindings, o)
		case *rbacv1.ClusterRole:
			clusterRoles = append(clusterRoles, o)
		}
	}
	if deployment == nil {
		t.Fatal("demo-controller.yaml has no Deployment")
	}
	ns, sa := deployment.Namespace, deployment.Spec.Template.Spec.ServiceAccountName
	if r := deployment.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("the Deployment runs %d replicas; want 2: one leads, one waits to take over", ptrValue(r))
	}
	if s := deployment.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("the Deployment's update strategy is %s: want a RollingUpdate with maxUnavailable: 0, so that a new pod "+
			"is started (and waits for the Lease) before an old one is stopped (and releases it)", s.Type)
	}
	named := false
	for _, e := range deployment.Spec.Template.Spec.Containers[0].Env {
		named = named || e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}
	if !named {
		t.Errorf("the container has no env POD_NAME from the pod's name (valueFrom.fieldRef.fieldPath: metadata.name, the downward API)")
	}

	// What leaderelection does with a Lease: get, create the first time,
	// update to renew, take over and release. In the replicas' namespace only.
	for _, cr := range clusterRoles {
		for _, rule := range cr.Rules {
			if grants(rule, "get", "") || grants(rule, "update", "") {
				t.Errorf("the ClusterRole %s grants leases in every namespace: grant them with a Role in %s only", cr.Name, ns)
			}
		}
	}
	for _, verb := range []string{"get", "create", "update"} {
		ok := false
		for _, b := range bindings {
			if b.Namespace != ns || b.RoleRef.Kind != "Role" ||
				!slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns }) {
				continue
			}
			for _, r := range roles {
				if r.Name == b.RoleRef.Name && r.Namespace == ns && slices.ContainsFunc(r.Rules, func(rule rbacv1.PolicyRule) bool { return grants(rule, verb, "demo-controller") }) {
					ok = true
				}
			}
		}
		if !ok {
			t.Errorf("no Role in %s, bound to the ServiceAccount %s, grants %s on the Lease demo-controller (leases in the API group coordination.k8s.io)", ns, sa, verb)
		}
	}
	for _, r := range roles {
		for _, rule := range r.Rules {
			for _, verb := range []string{"delete", "list", "watch", "patch"} {
				if grants(rule, verb, "demo-controller") {
					t.Errorf("the Role %s grants %s on leases, which leader election never does: grant get, create and update only", r.Name, verb)
				}
			}
		}
	}
}

// grants reports whether rule allows verb on the Lease name (on any Lease if
// name is ""). RBAC checks a create before the object has a name.
func grants(rule rbacv1.PolicyRule, verb, name string) bool {
	has := func(list []string, want string) bool {
		return slices.Contains(list, want) || slices.Contains(list, "*")
	}
	return has(rule.APIGroups, "coordination.k8s.io") && has(rule.Resources, "leases") && has(rule.Verbs, verb) &&
		(len(rule.ResourceNames) == 0 || verb != "create" && name != "" && slices.Contains(rule.ResourceNames, name))
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// leaseAPI is an API server for this test, enough for run: the pods of one
// namespace (list, and watch with or without their initial events) and
// Leases (get, create, update, with resourceVersion checks as a real one
// does). Each replica has an address of its own, so it knows who asks.
type leaseAPI struct {
	journal *journal

	mu        sync.Mutex
	rv        int
	pods      []*corev1.Pod
	watches   map[chan []byte]bool
	leases    map[string]*coordinationv1.Lease // by namespace/name
	tries     map[string]int                   // Lease requests, by replica
	wrote     map[string]string                // the last holder each replica wrote
	informers map[string]bool                  // replicas that listed or watched pods as an informer does
	cut       map[string]bool                  // replicas whose Lease requests fail
	replicas  []*replica
}

func newLeaseAPI(t *testing.T, pods ...string) *leaseAPI {
	s := &leaseAPI{journal: &journal{}, watches: map[chan []byte]bool{}, leases: map[string]*coordinationv1.Lease{},
		tries: map[string]int{}, wrote: map[string]string{}, informers: map[string]bool{}, cut: map[string]bool{}}
	for _, name := range pods {
		s.addPod(name)
	}
	return s
}

// replica is one run of the program, with its own name and log.
type replica struct {
	name    string
	journal *journal
	cancel  context.CancelFunc
	done    chan struct{} // closed when run has returned
	err     error         // what it returned
}

// start runs run as the replica name: POD_NAME=name, an address of its own
// on the API server, the pods of "shop". The caller waits until it has used
// POD_NAME before starting another.
func (s *leaseAPI) start(t *testing.T, name string) *replica {
	t.Setenv("POD_NAME", name)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, name) }))
	t.Cleanup(server.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {}}]
contexts: [{name: test, context: {cluster: test, user: test, namespace: %q}}]
current-context: test
`, server.URL, leaseNamespace)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, journal: s.journal, done: make(chan struct{})}
	s.mu.Lock()
	s.replicas = append(s.replicas, r)
	s.mu.Unlock()
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(journalWriter{s.journal, name})))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = run(ctx, options{kubeconfig: kubeconfig, namespace: watched, startupTimeout: 10 * time.Second, syncTimeout: time.Minute})
	}()
	t.Cleanup(func() {
		cancel()
		wait := 10 * time.Second
		if t.Failed() {
			wait = time.Second // the failure is reported; do not add to it
		}
		select {
		case <-r.done:
		case <-time.After(wait):
			if !t.Failed() {
				t.Errorf("%s: run did not return within 10 s of its context ending", name)
			}
		}
	})
	return r
}

// logged reports whether the replica logged a line that starts with prefix.
func (r *replica) logged(prefix string) bool {
	return slices.ContainsFunc(r.journal.all(), func(e entry) bool { return e.who == r.name && strings.HasPrefix(e.line, prefix) })
}

// tail returns the replica's last n lines.
func (r *replica) tail(n int) string {
	var lines []string
	for _, e := range r.journal.all() {
		if e.who == r.name {
			lines = append(lines, e.line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitFor waits, at most 10 s, until done.
func (s *leaseAPI) waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return done(), nil })
	if err != nil {
		t.Fatalf("waited 10 s for %s%s. The journal:\n%s", what, s.ended(), s.journal.tail(20))
	}
}

// ended says which replicas' runs have returned, and what.
func (s *leaseAPI) ended() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out string
	for _, r := range s.replicas {
		select {
		case <-r.done:
			out += fmt.Sprintf("; %s's run returned %v", r.name, r.err)
		default:
		}
	}
	return out
}

// waitForTries waits until r has asked for the Lease n times: it waits for
// it, and has read POD_NAME.
func (s *leaseAPI) waitForTries(t *testing.T, r *replica, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.tries[r.name] >= n, nil
	})
	if err != nil {
		t.Fatalf("%s asked for the Lease %d times in 10 s; want %d at least, one every %v or so (the retry period): "+
			"with POD_NAME set, a replica waits for the Lease, trying again and again. The journal:\n%s",
			r.name, s.tries[r.name], n, leaseFor*2/15, s.journal.tail(20))
	}
}

// holder returns the holder of the Lease demo-controller, wherever it is.
func (s *leaseAPI) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		return ptrValue(l.Spec.HolderIdentity)
	}
	return ""
}

// cutOff makes every Lease request of the replica fail from now on.
func (s *leaseAPI) cutOff(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[name] = true
	s.journal.add("test", fmt.Sprintf("%s cut off from the Lease", name))
}

// addPod creates a pod in "shop" and sends it to every watch.
func (s *leaseAPI) addPod(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	pod := testPod(watched, name, "uid-"+name, strconv.Itoa(s.rv), corev1.PodRunning)
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	s.pods = append(s.pods, pod)
	for ch := range s.watches {
		ch <- watchEvent("ADDED", pod)
	}
}

func watchEvent(kind string, obj runtime.Object) []byte {
	data, _ := json.Marshal(map[string]any{"type": kind, "object": obj})
	return append(data, '\n')
}

// serve answers a request from the replica who.
func (s *leaseAPI) serve(w http.ResponseWriter, r *http.Request, who string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case r.URL.Path == "/api/v1/namespaces/"+watched+"/pods" && r.Method == http.MethodGet && q.Get("watch") == "true":
		s.mu.Lock()
		// run's own check is a WATCH from now; an informer's asks for the
		// initial events, or starts from a resourceVersion.
		if q.Get("sendInitialEvents") == "true" || q.Get("resourceVersion") != "" {
			s.informers[who] = true
		}
		var events [][]byte
		if q.Get("sendInitialEvents") == "true" {
			for _, pod := range s.pods {
				events = append(events, watchEvent("ADDED", pod))
			}
			events = append(events, watchEvent("BOOKMARK", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.rv), Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}))
		}
		ch := make(chan []byte, 100)
		s.watches[ch] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.watches, ch)
			s.mu.Unlock()
		}()
		w.Header().Set("Content-Type", "application/json")
		for _, e := range events {
			w.Write(e)
		}
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-ch:
				w.Write(e)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.URL.Path == "/api/v1/namespaces/"+watched+"/pods" && r.Method == http.MethodGet:
		s.mu.Lock()
		if q.Get("limit") != "1" { // run's own check lists one pod
			s.informers[who] = true
		}
		list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
		for _, pod := range s.pods {
			list.Items = append(list.Items, *pod)
		}
		s.mu.Unlock()
		writeObject(w, http.StatusOK, list)
	case len(parts) >= 6 && strings.Join(parts[:4], "/") == "apis/coordination.k8s.io/v1/namespaces" && parts[5] == "leases":
		s.lease(w, r, who, parts[4], strings.Join(parts[6:], "/"))
	default:
		apiStatus(w, http.StatusNotFound, "NotFound", "this test's API server serves only the pods of "+watched+" and Leases, not "+r.URL.Path)
	}
}

// lease answers a GET, POST or PUT of a Lease.
func (s *leaseAPI) lease(w http.ResponseWriter, r *http.Request, who, namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[who]++
	if s.cut[who] {
		apiStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the test cut "+who+" off from the Lease")
		return
	}
	var lease coordinationv1.Lease
	if r.Method != http.MethodGet {
		body, err := io.ReadAll(r.Body)
		if err == nil { // (client-go sends protobuf, which the universal deserializer also reads)
			_, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, &lease)
		}
		if err != nil {
			apiStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		name = lease.Name
	}
	key := namespace + "/" + name
	old := s.leases[key]
	switch {
	case r.Method == http.MethodGet && old != nil:
		writeObject(w, http.StatusOK, old)
		return
	case r.Method == http.MethodGet || r.Method == http.MethodPut && old == nil:
		apiStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("leases.coordination.k8s.io %q not found", name))
		return
	case r.Method == http.MethodPost && old != nil:
		apiStatus(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("leases.coordination.k8s.io %q already exists", name))
		return
	case r.Method == http.MethodPut && lease.ResourceVersion != old.ResourceVersion:
		apiStatus(w, http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on leases.coordination.k8s.io %q: the object has been modified", name))
		return
	}
	s.rv++
	lease.Namespace, lease.ResourceVersion = namespace, strconv.Itoa(s.rv)
	lease.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
	s.leases[key] = &lease
	holder := ptrValue(lease.Spec.HolderIdentity)
	if old == nil || ptrValue(old.Spec.HolderIdentity) != holder {
		s.journal.add("api", fmt.Sprintf("Lease %s: holder %q, written by %s", key, holder, who))
	}
	if holder != "" {
		s.wrote[who] = holder
	}
	writeObject(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[r.Method == http.MethodPost], &lease)
}

func writeObject(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(obj)
}

// journal is what the replicas logged and what happened to the Lease, in
// the order it happened.
type journal struct {
	mu      sync.Mutex
	entries []entry
}

type entry struct{ who, line string }

func (j *journal) add(who, line string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, entry{who, line})
}

func (j *journal) all() []entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// tail returns the last n entries, one a line.
func (j *journal) tail(n int) string {
	all := j.all()
	var lines []string
	for _, e := range all[max(0, len(all)-n):] {
		lines = append(lines, e.who+": "+e.line)
	}
	return strings.Join(lines, "\n")
}

// journalWriter writes one replica's log lines, without klog's headers,
// into the journal. textlogger writes each line whole.
type journalWriter struct {
	journal *journal
	who     string
}

func (w journalWriter) Write(data []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		w.journal.add(w.who, klogHeader.ReplaceAllString(line, ""))
	}
	return len(data), nil
}
