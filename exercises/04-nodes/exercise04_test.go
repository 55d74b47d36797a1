//go:build exercise

// The test of exercise 4 (exercises/04-nodes/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says. Each of its checks stands for
// a mistake a solution can make, and names it when it fails.

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"demo-controller/internal/fakeapi"
)

// TestExercise04NodeZones runs the controller as a real run does
// (runController) on a fake clientset with three pods: web-1 on node-1, in
// zone-a; web-2 on node-2, which has no zone; web-3 on node-3, which the
// cluster no longer has. The nodes are slow to list: the first LIST of nodes
// is held back until the controller reports a pod (which it must not do
// before it knows the nodes), or for 2 s. Then web-4 is created, scheduled to
// node-1, and web-1 is deleted. Each line about a pod on node-1 must carry
// zone="zone-a" just after pod; no other line a zone; no node may be read
// from the API server; and once runController has returned, nothing may
// still watch the nodes.
func TestExercise04NodeZones(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the whole test takes 3 s
	defer cancel()
	log := &fakeapi.Log{}
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log))))
	fakeClient := fake.NewClientset(exercise04Node("node-1", "zone-a"), exercise04Node("node-2", ""), exercise04Decoy(),
		exercise04Pod("web-1", "1", "node-1", corev1.PodRunning), exercise04Pod("web-2", "1", "node-2", corev1.PodRunning),
		exercise04Pod("web-3", "1", "node-3", corev1.PodRunning))
	client := &exercise04Client{Clientset: fakeClient, log: log, holdFirstList: true}
	run := exercise04Start(ctx, client, 10*time.Second)
	started := time.Now()
	deleted := false  // whether web-1 has been deleted yet
	stopping := false // whether the test has ended runController's context

	// mistake says, as soon as it shows, what the controller did wrong
	// with the nodes: read them from the API server, report a pod while
	// they were still being listed, never start the node informer, fail or
	// panic on a pod.
	mistake := func() error {
		var gets, lists int
		podsListed := false
		for _, a := range fakeClient.Actions() {
			switch a.GetResource().Resource {
			case "nodes":
				switch a.GetVerb() {
				case "get":
					gets++
				case "list":
					lists++
				}
			case "pods":
				podsListed = podsListed || a.GetVerb() == "list"
			}
		}
		errLine := slices.IndexFunc(log.Lines(), func(line string) bool { return strings.Contains(line, " err=") })
		client.mu.Lock()
		defer client.mu.Unlock()
		switch {
		case run.ended() && !stopping:
			return run.early(deleted)
		case gets > 0:
			return fmt.Errorf("the node was read from the API server, not from the cache: the controller sent %d GET requests for nodes. "+
				"The task reads the nodes from an informer's cache, never asking the API server for a node each time a pod changes", gets)
		case lists > 1:
			return fmt.Errorf("the nodes were listed %d times: an informer lists them once, then watches them. "+
				"The task reads the nodes from its cache, never asking the API server each time a pod changes", lists)
		case client.reportedWhileListing != "":
			return fmt.Errorf("the worker started before the node cache synced: while the test held back the LIST of nodes, the controller logged\n  %s\n"+
				"Pods that exist at the start must get their zone too, even when the nodes take longer to list than the pods: "+
				"Run waits for the node cache as it waits for the pods'", client.reportedWhileListing)
		case errLine >= 0:
			line := log.Lines()[errLine]
			why := "A pod on no node yet, on a node with no zone label, or on a node the cluster does not have, gets no zone key, and nothing else changes"
			switch {
			case strings.Contains(line, `pod="default/web-3"`):
				why = "web-3 is on node-3, which the cluster does not have (a node deleted before its pods): the node cache has no node-3, " +
					"so web-3 gets no zone key, and is reported all the same. A node missing from the cache is no error to retry"
			case strings.Contains(line, `pod="default/web-4"`) && !strings.Contains(line, "node-1"):
				why = "web-4 was created on no node yet (its nodeName is empty): it gets no zone key, and is reported all the same"
			case strings.Contains(line, `pod="default/web-2"`):
				why = "web-2 is on node-2, which has no zone label: it gets no zone key, and is reported all the same"
			}
			return fmt.Errorf("the controller failed to handle a pod:\n  %s\n%s", line, why)
		case client.listCalled.IsZero() && podsListed && time.Since(started) > 2*time.Second:
			return errors.New("2 s after the start, the pods have been listed and nothing has listed the nodes: the node informer was never started. " +
				"A factory's StartWithContext starts the informers asked of it until then, and no later one: ask runController's " +
				"factory for the node informer before it starts (an informer from a second factory needs that factory started, and shut down, too)")
		}
		return nil
	}
	// waitForLine waits, at most 5 s, for a line that starts with prefix,
	// and returns it; it stops at once at a mistake.
	waitForLine := func(prefix string) string {
		t.Helper()
		var line string
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			if err := mistake(); err != nil {
				return false, err
			}
			i := slices.IndexFunc(log.Lines(), func(l string) bool { return strings.HasPrefix(l, prefix) })
			if i >= 0 {
				line = log.Lines()[i]
			}
			return i >= 0, nil
		})
		if err != nil && mistake() != nil {
			t.Fatal(mistake())
		} else if err != nil {
			t.Fatalf("no line %s within 5 s. %s", prefix, fakeapi.Logged(log.Last(10)))
		}
		return line
	}
	// expect compares a line with the one the task wants, and says how
	// they differ, and why (once for each cause).
	said := map[string]bool{}
	expect := func(got, want, why string) {
		t.Helper()
		diff, cause := exercise04Compare(got, want, why, log.Lines())
		switch {
		case diff == "":
		case said[cause]:
			t.Errorf("%s\n(as above)", diff)
		default:
			said[cause] = true
			t.Errorf("%s\n%s", diff, cause)
		}
	}

	web1 := waitForLine(`"Pod found" pod="default/web-1"`)
	web2 := waitForLine(`"Pod found" pod="default/web-2"`)
	web3 := waitForLine(`"Pod found" pod="default/web-3"`)
	// Had the nodes been listed, when the pods were reported?
	var called, listed time.Time
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		client.mu.Lock()
		defer client.mu.Unlock()
		called, listed = client.listCalled, client.listReturned
		return called.IsZero() || !listed.IsZero(), nil
	})
	if err := mistake(); err != nil {
		t.Fatal(err)
	} else if called.IsZero() {
		t.Fatalf("the controller logged\n  %s\nand nothing has listed the nodes: the task reads them from an informer's cache", web1)
	}
	if wait := time.Since(listed); !listed.IsZero() && wait > time.Second/2 {
		t.Errorf("the worker reported the pods found at the start %v after the nodes were listed: "+
			"does it wait a fixed time (a sleep) instead of waiting for the node cache to sync?", wait.Round(100*time.Millisecond))
	}
	expect(web1, `"Pod found" pod="default/web-1" zone="zone-a" phase="Running" node="node-1"`, "web-1 is on node-1, in zone-a")
	expect(web2, `"Pod found" pod="default/web-2" phase="Running" node="node-2"`, "web-2 is on node-2, which has no zone label")
	expect(web3, `"Pod found" pod="default/web-3" phase="Running" node="node-3"`, "web-3 is on node-3, which the cluster does not have")

	// A pod created now, on no node yet; then scheduled to node-1; then
	// web-1 deleted.
	if _, err := fakeClient.CoreV1().Pods("default").Create(ctx, exercise04Pod("web-4", "1", "", corev1.PodPending), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(waitForLine(`"Pod created" pod="default/web-4"`), `"Pod created" pod="default/web-4" phase="Pending"`, "web-4 is on no node yet")
	if _, err := fakeClient.CoreV1().Pods("default").Update(ctx, exercise04Pod("web-4", "2", "node-1", corev1.PodPending), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(waitForLine(`"Pod scheduled" pod="default/web-4"`), `"Pod scheduled" pod="default/web-4" zone="zone-a" node="node-1"`,
		"web-4, created on no node, is now on node-1: its zone is looked up when it changes, from the pod as it is now")
	if err := fakeClient.CoreV1().Pods("default").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted = true
	expect(waitForLine(`"Pod deleted" pod="default/web-1"`), `"Pod deleted" pod="default/web-1" zone="zone-a" phase="Running"`,
		"web-1 was on node-1, in zone-a: the line that says it is gone carries that zone too")

	stopping = true
	cancel() // the worker finishes the call in hand, then runController returns
	if err := run.wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := mistake(); err != nil {
		t.Fatal(err)
	}
	// Once runController has returned, its informers have stopped.
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		return client.watching() == 0, nil
	}); err != nil {
		t.Errorf("runController returned, and 2 s later the nodes were still watched (%d watches open): the node informer "+
			"runs on after the controller has stopped. Take it from runController's factory, which starts it with ctx and "+
			"shuts it down before runController returns", client.watching())
	}
}

// TestExercise04NodesRefused runs runController with a sync timeout of 1 s
// on a fake clientset that refuses to list nodes (403 Forbidden, as a
// cluster does when the ClusterRole grants nothing on nodes): the node cache
// never syncs, so runController must give up within its sync timeout, with
// an error, as it does when the pods cannot be listed, and report no pod.
func TestExercise04NodesRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := &fakeapi.Log{}
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log))))
	fakeClient := fake.NewClientset(exercise04Node("node-1", "zone-a"), exercise04Pod("web-1", "1", "node-1", corev1.PodRunning))
	client := &exercise04Client{Clientset: fakeClient, log: log, refuseList: true}
	const syncTimeout = time.Second
	run := exercise04Start(ctx, client, syncTimeout)
	reported := func() string {
		i := slices.IndexFunc(log.Lines(), func(line string) bool { return strings.HasPrefix(line, `"Pod `) })
		if i < 0 {
			return ""
		}
		return log.Lines()[i]
	}
	err := run.wait(syncTimeout + 4*time.Second)
	switch {
	case run.panicked:
		t.Fatal(err)
	case !run.ended():
		cancel()
		_ = run.wait(10 * time.Second)
		why := "the wait for the node cache has no deadline (WaitForCacheSync(ctx.Done()) waits for ever): wait for it where Run waits for the pods', within the same sync timeout"
		if line := reported(); line != "" {
			why = fmt.Sprintf("and the worker started without the nodes: it logged\n  %s\nRun waits for the node cache as it waits for the pods', and gives up after the sync timeout", line)
		}
		t.Fatalf("with the nodes' LIST refused (403, as on a cluster whose ClusterRole grants nothing on nodes), runController "+
			"had not returned %v after it started, with a sync timeout of %v: %s", syncTimeout+4*time.Second, syncTimeout, why)
	case err == nil:
		t.Errorf("with the nodes' LIST refused (403, as on a cluster whose ClusterRole grants nothing on nodes), runController " +
			"returned no error: the node cache never synced, so the controller gives up after the sync timeout, with an error, " +
			"as it does when the pods cannot be listed")
	}
	if line := reported(); line != "" {
		t.Errorf("with the nodes' LIST refused, the node cache never synced, and yet the controller logged\n  %s\n"+
			"The worker starts only once the pods and the nodes have both been listed", line)
	}
}

// TestExercise04ClusterRole reads demo-controller.yaml: the ClusterRole bound
// to the Deployment's ServiceAccount must grant list and watch on nodes, as
// on pods (the node informer lists, then watches, every node), and nothing
// more on either: the controller reads them from its caches.
func TestExercise04ClusterRole(t *testing.T) {
	var deployment *appsv1.Deployment
	var clusterRoles []*rbacv1.ClusterRole
	var bindings []*rbacv1.ClusterRoleBinding
	var roles []*rbacv1.Role
	for _, obj := range fakeapi.Manifest(t, "demo-controller.yaml") {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			deployment = o
		case *rbacv1.ClusterRole:
			clusterRoles = append(clusterRoles, o)
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, o)
		case *rbacv1.Role:
			roles = append(roles, o)
		}
	}
	if deployment == nil {
		t.Fatal("demo-controller.yaml has no Deployment")
	}
	ns, sa := deployment.Namespace, cmp.Or(deployment.Spec.Template.Spec.ServiceAccountName, "default")
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	// The ClusterRoles bound to the ServiceAccount.
	var bound []*rbacv1.ClusterRole
	for _, b := range bindings {
		if b.RoleRef.Kind != "ClusterRole" || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns
		}) {
			continue
		}
		for _, cr := range clusterRoles {
			if cr.Name == b.RoleRef.Name {
				bound = append(bound, cr)
			}
		}
	}
	has := func(list []string, want string) bool {
		return slices.Contains(list, want) || slices.Contains(list, "*")
	}
	for _, resource := range []string{"pods", "nodes"} {
		// The verbs granted on every object of the resource, in the core group.
		var verbs []string
		for _, cr := range bound {
			for _, rule := range cr.Rules {
				if has(rule.APIGroups, "") && has(rule.Resources, resource) && len(rule.ResourceNames) == 0 {
					verbs = append(verbs, rule.Verbs...)
				}
			}
		}
		var missing []string
		for _, verb := range []string{"list", "watch"} {
			if !has(verbs, verb) {
				missing = append(missing, verb)
			}
		}
		if len(missing) > 0 {
			granted := "nothing"
			if len(verbs) > 0 {
				slices.Sort(verbs)
				granted = strings.Join(slices.Compact(verbs), ", ")
			}
			t.Errorf("demo-controller.yaml: the ClusterRole of the ServiceAccount %s/%s does not grant %s on %s (it grants %s on them). The %s informer "+
				"lists, then watches, every %s: on a cluster the API server would refuse it (%s is forbidden: User %q cannot %s "+
				"resource %q in API group \"\" at the cluster scope), its cache would never sync, and the controller would give up "+
				"after --sync-timeout. Grant list and watch on %s (API group \"\") in the ClusterRole.%s",
				ns, sa, strings.Join(missing, " and "), resource, granted, strings.TrimSuffix(resource, "s"), strings.TrimSuffix(resource, "s"),
				resource, user, missing[0], resource, resource, exercise04NearMiss(resource, clusterRoles, bound, roles, ns, sa))
		}
		var extra []string
		for _, verb := range verbs {
			if verb != "list" && verb != "watch" && !slices.Contains(extra, verb) {
				extra = append(extra, verb)
			}
		}
		if len(extra) > 0 {
			t.Errorf("demo-controller.yaml: the ClusterRole of the ServiceAccount %s/%s grants %s on %s: the controller reads %s "+
				"from its informer's cache, and needs only list and watch. Grant nothing more",
				ns, sa, strings.Join(extra, ", "), resource, resource)
		}
	}
}

// exercise04NearMiss says why a rule of demo-controller.yaml that seems to
// grant something on resource does not count, if one does.
func exercise04NearMiss(resource string, clusterRoles, bound []*rbacv1.ClusterRole, roles []*rbacv1.Role, ns, sa string) string {
	names := func(resources []string) bool {
		return slices.ContainsFunc(resources, func(r string) bool {
			return strings.EqualFold(strings.TrimSuffix(r, "s"), strings.TrimSuffix(resource, "s"))
		})
	}
	for _, r := range roles {
		for _, rule := range r.Rules {
			if names(rule.Resources) {
				why := "nodes belong to none"
				if resource == "pods" {
					why = "the controller watches the pods of every namespace"
				}
				return fmt.Sprintf(" (The Role %s names %s, but a Role grants only within its namespace, and %s.)", r.Name, resource, why)
			}
		}
	}
	for _, cr := range clusterRoles {
		for _, rule := range cr.Rules {
			switch {
			case !names(rule.Resources):
			case !slices.Contains(bound, cr):
				return fmt.Sprintf(" (The ClusterRole %s names %s, but no ClusterRoleBinding binds it to the ServiceAccount %s/%s.)", cr.Name, resource, ns, sa)
			case !slices.Contains(rule.Resources, resource) && !slices.Contains(rule.Resources, "*"):
				return fmt.Sprintf(" (Its rule names the resource %q: RBAC's resources are lowercase plurals, %q.)", rule.Resources[slices.IndexFunc(rule.Resources, func(r string) bool { return names([]string{r}) })], resource)
			case !slices.Contains(rule.APIGroups, "") && !slices.Contains(rule.APIGroups, "*"):
				return fmt.Sprintf(" (Its rule for %s has apiGroups %q: %s are in the core API group, written \"\".)", resource, rule.APIGroups, resource)
			case len(rule.ResourceNames) > 0:
				return fmt.Sprintf(" (Its rule for %s is limited to resourceNames %q: a list or watch of every %s is not a request for one by name.)",
					resource, rule.ResourceNames, strings.TrimSuffix(resource, "s"))
			}
		}
	}
	return ""
}

// exercise04Node is a node as a cloud's kubelet labels it: node-1 has, besides
// its zone, its region and the deprecated zone label (the test gives that one
// another value than the zone, to tell which one a line shows).
func exercise04Node(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{corev1.LabelHostname: name}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
		n.Labels[corev1.LabelTopologyRegion] = "region-1"
		n.Labels[corev1.LabelFailureDomainBetaZone] = "beta-" + zone
	}
	return n
}

// exercise04Decoy is a node that no cluster has: its name is "default/node-1",
// the key under which a lookup that adds the pod's namespace to the node's
// name looks for node-1. Its zone says so.
func exercise04Decoy() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "default/node-1", ResourceVersion: "1",
		Labels: map[string]string{corev1.LabelTopologyZone: "looked-up-under-default-slash-node-1"}}}
}

// exercise04WrongZones says, for each zone a line can show by mistake, what
// it is.
var exercise04WrongZones = map[string]string{
	"region-1": "zone-a is node-1's label topology.kubernetes.io/zone (corev1.LabelTopologyZone); region-1 is its label " +
		"topology.kubernetes.io/region: its region, not its zone",
	"beta-zone-a": "zone-a is node-1's label topology.kubernetes.io/zone (corev1.LabelTopologyZone); beta-zone-a is its label " +
		"failure-domain.beta.kubernetes.io/zone (corev1.LabelZoneFailureDomain), deprecated since Kubernetes 1.17, to which the " +
		"test gives another value, to tell the two apart",
	"node-1": "zone-a is node-1's label topology.kubernetes.io/zone (corev1.LabelTopologyZone); node-1 is its name (and its " +
		"label kubernetes.io/hostname)",
	"looked-up-under-default-slash-node-1": `This is the zone of a node named "default/node-1": the node was looked up under the ` +
		`pod's namespace and the node's name. A node belongs to no namespace: the node cache knows it by its name alone, ` +
		`pod.Spec.NodeName ("node-1"), which is what the lister's Get takes`,
}

// exercise04Compare compares a line with the one the task wants, and says
// how they differ ("" if they do not), and why. lines is all that was
// logged, to tell a line that lost its zone from a controller that never
// logs one.
func exercise04Compare(got, want, why string, lines []string) (diff, cause string) {
	zoneOf := func(line string) (string, bool) {
		m := regexp.MustCompile(` zone="([^"]*)"`).FindStringSubmatch(line)
		if m == nil {
			return "", false
		}
		return m[1], true
	}
	gotZone, gotHas := zoneOf(got)
	wantZone, wantHas := zoneOf(want)
	switch {
	case got == want:
		return "", ""
	case gotHas && exercise04WrongZones[gotZone] != "":
		return fmt.Sprintf("the line\n  %s\nhas zone=%q; want\n  %s", got, gotZone, want), exercise04WrongZones[gotZone]
	case gotHas && gotZone == "":
		return fmt.Sprintf("the line\n  %s\nhas an empty zone; want\n  %s\n(%s)", got, want, why),
			"A pod whose node has no zone gets no zone key at all"
	case wantHas && !gotHas && regexp.MustCompile(` [A-Za-z]+="`+wantZone+`"`).MatchString(got):
		key := regexp.MustCompile(` ([A-Za-z]+)="` + wantZone + `"`).FindStringSubmatch(got)[1]
		return fmt.Sprintf("the line\n  %s\ncarries the zone under the key %q; want\n  %s", got, key, want), "The task's key is zone, just after pod"
	case wantHas && !gotHas && !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, " zone=") }):
		return fmt.Sprintf("the line\n  %s\nhas no zone; want\n  %s\n(%s)", got, want, why),
			"No line has a zone, though the nodes were listed, node-1 with the label topology.kubernetes.io/zone=zone-a. " + exercise04NoZone()
	case wantHas && !gotHas:
		return fmt.Sprintf("the line\n  %s\nhas no zone; want\n  %s", got, want), "(" + why + ")"
	case !wantHas && gotHas:
		return fmt.Sprintf("the line\n  %s\nhas a zone; want\n  %s", got, want), "(" + why + ")"
	case wantHas && gotZone != wantZone:
		return fmt.Sprintf("the line\n  %s\nhas zone=%q; want\n  %s", got, gotZone, want), "(" + why + ")"
	case wantHas && !regexp.MustCompile(`^"[^"]+" pod="[^"]+" zone=`).MatchString(got):
		return fmt.Sprintf("the line\n  %s\nhas its zone, but not just after pod; want\n  %s", got, want),
			"Every line about the pod has its zone just after pod: add it to the logger that carries pod, in sync"
	}
	return fmt.Sprintf("the line\n  %s\nwant\n  %s", got, want), "(" + why + ")"
}

// exercise04NoZone says where to look when no line has a zone: whether the
// project's code names the zone's label at all.
func exercise04NoZone() string {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if data, err := os.ReadFile(f); err == nil &&
			(strings.Contains(string(data), "LabelTopologyZone") || strings.Contains(string(data), `"topology.kubernetes.io/zone"`)) {
			return "The code names that label: look up the node by its name alone (pod.Spec.NodeName), and put the logger " +
				"with zone into the context the handler gets (ctx = klog.NewContext(ctx, logger)): a logger made and not passed on logs nothing"
		}
	}
	return "No Go file of the project names that label (corev1.LabelTopologyZone, \"topology.kubernetes.io/zone\"): the zone is read from it"
}

func exercise04Pod(name, resourceVersion, nodeName string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: resourceVersion},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "example/app"}}},
		Status:     corev1.PodStatus{Phase: phase},
	}
}

// exercise04Run is runController, run in a goroutine until it returns or
// panics (the worker runs in runController's goroutine, so a panic in sync
// or the handler is caught here, and said).
type exercise04Run struct {
	done     chan error
	result   error
	returned bool
	panicked bool
}

func exercise04Start(ctx context.Context, client *exercise04Client, syncTimeout time.Duration) *exercise04Run {
	r := &exercise04Run{done: make(chan error, 1)}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.done <- fmt.Errorf("the controller panicked: %v\n%s", p, exercise04Frames(debug.Stack()))
			}
		}()
		r.done <- runController(ctx, client, "fake", "", syncTimeout, newHandler())
	}()
	return r
}

// ended reports whether runController has returned (or panicked).
func (r *exercise04Run) ended() bool {
	if !r.returned {
		select {
		case r.result = <-r.done:
			r.returned = true
			r.panicked = r.result != nil && strings.HasPrefix(r.result.Error(), "the controller panicked")
		default:
		}
	}
	return r.returned
}

// wait waits at most d for runController to return, and returns its error,
// or an error that says it did not return.
func (r *exercise04Run) wait(d time.Duration) error {
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, d, true, func(context.Context) (bool, error) { return r.ended(), nil })
	if !r.ended() {
		return fmt.Errorf("runController did not return within %v of the end of its context", d)
	}
	if r.result != nil {
		return fmt.Errorf("runController: %w", r.result)
	}
	return nil
}

// early says why runController ended before its context did.
func (r *exercise04Run) early(deleted bool) error {
	switch {
	case r.panicked && deleted && strings.Contains(r.result.Error(), "nil pointer"):
		return fmt.Errorf("%w\nweb-1 had just been deleted: once a pod is gone, the cache has no pod for its key (nil). The line that "+
			"says it is deleted carries the zone of the node it was on, looked up from the pod last reported", r.result)
	case r.panicked:
		return r.result
	case r.result != nil:
		return fmt.Errorf("runController returned before the end of its context: %w", r.result)
	}
	return errors.New("runController returned nil before the end of its context")
}

// exercise04Frames keeps, of a panic's stack, the frames in the project's
// own files: where the controller panicked.
func exercise04Frames(stack []byte) string {
	lines := strings.Split(string(stack), "\n")
	var frames []string
	for i := 1; i < len(lines) && len(frames) < 4; i++ {
		file := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(lines[i], "\t") || strings.Contains(file, "/pkg/mod/") || strings.Contains(file, "/src/runtime/") ||
			strings.Contains(file, "_test.go") {
			continue
		}
		file, _, _ = strings.Cut(file, " +")
		function := lines[i-1]
		if j := strings.LastIndex(function, "("); j > 0 {
			function = function[:j]
		}
		frames = append(frames, "  at "+filepath.Base(file)+" in "+function)
	}
	return strings.Join(frames, "\n")
}

// exercise04Client is the fake clientset with a slow node list: with
// holdFirstList, the first LIST of nodes waits, outside the fake clientset,
// until the controller has logged a line about a pod (the worker has
// started), or for 2 s (a reactor that waited would hold the fake clientset's
// lock all that time, and the pods' LIST with it); with refuseList, every
// LIST of nodes is refused, 403 Forbidden. It counts the node watches open.
type exercise04Client struct {
	*fake.Clientset // (and so IsWatchListSemanticsUnSupported: informers list, then watch)
	log             *fakeapi.Log
	holdFirstList   bool
	refuseList      bool

	mu                       sync.Mutex
	listCalled, listReturned time.Time
	reportedWhileListing     string // the first line about a pod logged while the nodes were held back
	open                     int    // node watches not yet stopped
}

func (c *exercise04Client) CoreV1() corev1client.CoreV1Interface {
	return exercise04CoreV1{c.Clientset.CoreV1(), c}
}

func (c *exercise04Client) watching() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

type exercise04CoreV1 struct {
	corev1client.CoreV1Interface
	client *exercise04Client
}

func (c exercise04CoreV1) Nodes() corev1client.NodeInterface {
	return exercise04Nodes{c.CoreV1Interface.Nodes(), c.client}
}

type exercise04Nodes struct {
	corev1client.NodeInterface
	client *exercise04Client
}

func (n exercise04Nodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	c := n.client
	if c.refuseList {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "",
			errors.New(`User "system:serviceaccount:demo-controller:demo-controller" cannot list resource "nodes" in API group "" at the cluster scope`))
	}
	c.mu.Lock()
	first := c.listCalled.IsZero()
	if first {
		c.listCalled = time.Now()
	}
	c.mu.Unlock()
	if !first || !c.holdFirstList {
		return n.NodeInterface.List(ctx, opts)
	}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		i := slices.IndexFunc(c.log.Lines(), func(line string) bool { return strings.Contains(line, ` pod="`) })
		if i >= 0 {
			c.mu.Lock()
			c.reportedWhileListing = c.log.Lines()[i]
			c.mu.Unlock()
		}
		return i >= 0, nil
	})
	list, err := n.NodeInterface.List(ctx, opts)
	c.mu.Lock()
	c.listReturned = time.Now()
	c.mu.Unlock()
	return list, err
}

func (n exercise04Nodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := n.NodeInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	n.client.mu.Lock()
	n.client.open++
	n.client.mu.Unlock()
	return &exercise04Watch{Interface: w, client: n.client}, nil
}

// exercise04Watch is a node watch that counts itself closed once stopped.
type exercise04Watch struct {
	watch.Interface
	client *exercise04Client
	once   sync.Once
}

func (w *exercise04Watch) Stop() {
	w.Interface.Stop()
	w.once.Do(func() {
		w.client.mu.Lock()
		w.client.open--
		w.client.mu.Unlock()
	})
}
