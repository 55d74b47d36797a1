//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// auditPolicy makes the API server log, at the Metadata level (who, which
// verb, which object, what answer; no bodies), every request for
// ConfigMaps and for the resources of demo.example.com (the Greeting of
// the exercises): how a test counts a controller's requests, including
// the writes that change nothing, which leave no other trace. Everything
// else goes unlogged, so that the scale benchmark pays nothing for it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    resources:
      - group: ""
        resources: [configmaps]
      - group: demo.example.com
  - level: None
`

// auditLogPath is where the n-th API server of the suite writes its audit
// log. (The log backend writes each event before the request is answered,
// in its default blocking mode, so a test that reads the log after an
// answer finds its request there.)
func auditLogPath(n int) string {
	return filepath.Join(workDir, fmt.Sprintf("audit-%d.log", n))
}

// auditEvent is the part of an audit event the tests read.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
}

// String is one line a test can print: "patch configmaps ns/name (200) by user".
func (e auditEvent) String() string {
	what := e.RequestURI
	if r := e.ObjectRef; r != nil {
		what = r.Resource
		if r.Subresource != "" {
			what += "/" + r.Subresource
		}
		what += " " + r.Namespace + "/" + r.Name
	}
	code := 0
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	return fmt.Sprintf("%s %s (%d) by %s at %s", e.Verb, what, code, e.User.Username, e.StageTimestamp.Format("15:04:05.000"))
}

// auditEvents returns the requests the suite's first API server has
// answered so far that match: those of user (every user if ""), in
// namespace ns, for which keep returns true (every one if keep is nil).
func auditEvents(t *testing.T, user, ns string, keep func(auditEvent) bool) []auditEvent {
	t.Helper()
	f, err := os.Open(auditLogPath(1))
	if err != nil {
		t.Fatalf("reading the API server's audit log: %v", err)
	}
	defer f.Close()
	var events []auditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var e auditEvent
		if json.Unmarshal(scanner.Bytes(), &e) != nil || e.ObjectRef == nil {
			continue // a line being written
		}
		if (user == "" || e.User.Username == user) && e.ObjectRef.Namespace == ns && (keep == nil || keep(e)) {
			events = append(events, e)
		}
	}
	return events
}

// isWrite reports whether an audited request asked to change something.
func isWrite(e auditEvent) bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// startGarbageCollector starts kube-controller-manager with only the
// garbage collector (and the namespace controller, which empties a deleted
// namespace), no leader election and no serving port, with its own
// identity, and waits until it has collected a canary: a ConfigMap owned by
// another ConfigMap, deleted with the owner. It stops when the test ends.
//
// The collector learns from the API server's discovery which resources
// exist, at start and then about every 30 s: a dependent of a resource it
// has not yet seen (a CRD installed after it started) is not collected
// until then. waitForCollection proves that it has seen one.
func startGarbageCollector(t *testing.T) *process {
	t.Helper()
	started := time.Now()
	p := startProcess("kube-controller-manager", filepath.Join(serversDir, "kube-controller-manager"),
		"--kubeconfig="+writeKubeconfig("kube-controller-manager", apiPort, controllerManagerToken),
		"--controllers=garbagecollector,namespace",
		"--use-service-account-credentials", // each controller as its ServiceAccount, with its bootstrap role
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=100", "--kube-api-burst=200",
	)
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("kube-controller-manager log (last lines):\n%s", p.tail(40))
		}
	})
	ns := namespace(t, "gc-canary")
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "canary-owner-", Namespace: ns}}
	waitForCollection(t, p, "v1", "ConfigMap", func(ctx context.Context) (metav1.Object, error) {
		return admin.CoreV1().ConfigMaps(ns).Create(ctx, owner, metav1.CreateOptions{})
	}, func(ctx context.Context, name string) error {
		return admin.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	t.Logf("kube-controller-manager started; its garbage collector collected the canary in %v", time.Since(started).Round(100*time.Millisecond))
	return p
}

// waitForCollection proves that the running garbage collector collects the
// dependents of apiVersion and kind: it creates an owner (create), a ConfigMap owned by
// it, deletes the owner (del, in the background), and waits up to 90 s for
// the ConfigMap to be gone, trying again with a new owner every 10 s (a
// dependent whose owner's kind the collector has not yet discovered may wait
// for a later pass; a fresh canary tells when it has). It fails the test if
// the collector exits or never collects one.
func waitForCollection(t *testing.T, gc *process, apiVersion, kind string, create func(context.Context) (metav1.Object, error), del func(context.Context, string) error) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(90 * time.Second)
	for try := 1; ; try++ {
		owner, err := create(ctx)
		if err != nil {
			t.Fatalf("garbage collector canary: creating its owner %s: %v", kind, err)
		}
		dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "canary-dependent-", Namespace: owner.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}},
		}}
		if dependent, err = admin.CoreV1().ConfigMaps(owner.GetNamespace()).Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
			t.Fatalf("garbage collector canary: creating the dependent of %s %s: %v", kind, owner.GetName(), err)
		}
		if err := del(ctx, owner.GetName()); err != nil {
			t.Fatalf("garbage collector canary: deleting its owner %s %s: %v", kind, owner.GetName(), err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			if gc.exited() {
				return false, fmt.Errorf("kube-controller-manager exited: %v\n%s", gc.err, gc.tail(20))
			}
			_, err := admin.CoreV1().ConfigMaps(dependent.Namespace).Get(ctx, dependent.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err == nil {
			t.Logf("garbage collector canary: the dependent of a deleted %s was collected (try %d)", kind, try)
			return
		}
		if gc.exited() || time.Now().After(deadline) {
			t.Fatalf("garbage collector canary: the ConfigMap %s/%s, owned by a deleted %s, was not collected within 90 s: %v", dependent.Namespace, dependent.Name, kind, err)
		}
	}
}

// TestGarbageCollector: the suite's kube-controller-manager starts, and its
// garbage collector deletes a dependent whose owner is gone; without it, the
// dependent stays.
func TestGarbageCollector(t *testing.T) {
	ns := namespace(t, "gc")
	ctx := context.Background()
	owner, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// No collector yet: nothing else deletes a dependent. (Its owner is gone
	// for good; the dependent would stay for ever.)
	stays := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, dependent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil // (not any error: a Get cut short by the deadline is no answer)
	})
	if stays == nil {
		t.Fatal("the dependent ConfigMap went away with no garbage collector running: something else deletes it, and the tests that rely on the collector prove nothing")
	}
	startGarbageCollector(t)
	// Once started, the collector finds the orphan on its own.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, dependent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the garbage collector did not delete a dependent whose owner was deleted before it started, within 30 s: %v", err)
	}
	if deletes := auditEvents(t, "system:serviceaccount:kube-system:generic-garbage-collector", ns, func(e auditEvent) bool {
		return e.Verb == "delete" && e.ObjectRef.Name == dependent.Name
	}); len(deletes) == 0 {
		t.Errorf("the audit log shows no delete of %s/%s by the garbage collector's ServiceAccount; its lines for that namespace:\n%s", ns, dependent.Name, strings.Join(eventLines(auditEvents(t, "", ns, nil)), "\n"))
	}
}

// eventLines prints audit events one per line.
func eventLines(events []auditEvent) []string {
	lines := make([]string, len(events))
	for i, e := range events {
		lines[i] = "  " + e.String()
	}
	return lines
}
