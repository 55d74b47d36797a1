//go:build exercise

// The test of exercise 10 (exercises/10-finalizers/README.md). It is not
// part of the project's tests: copy it into the project's root and run it
// with the exercise tag, as the exercise's README says.
//
// client-go's fake clientset cannot serve this exercise: it deletes an
// object that has finalizers at once, and never sets deletionTimestamp. So
// the test runs demo-controller (run, as main does) against a small API
// server over HTTP (internal/fakeapi's, with this test's answers to
// writes) that keeps a Greeting with finalizers, sets its
// deletionTimestamp, and deletes it once its last finalizer is gone; that
// refuses, in kube-apiserver v1.36's words, a finalizer added to a
// Greeting being deleted, a patch whose resourceVersion is stale, and a
// JSON patch that does not apply; that fails a chosen write once with a
// 500, as a real one may; and that notes every request, so that it can say
// which one broke a rule of the task, and compare the verbs sent with those
// that demo-controller.yaml grants. What it cannot show (the garbage
// collector, RBAC, a SIGKILL) the end-to-end test shows on a real server.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"sigs.k8s.io/yaml"

	"demo-controller/internal/fakeapi"
)

// ex10Wait bounds each wait: the API server below answers at once, so
// what has not happened within it is not coming.
const ex10Wait = 5 * time.Second

// The task's names.
const (
	ex10Finalizer  = "demo.example.com/greeting-record"
	ex10RecordNS   = "demo-controller"
	ex10RecordName = "greetings"
	ex10Other      = "other.example.com/keep" // another controller's finalizer
)

// A Greeting's record is kept, then removed, behind its finalizer.
func TestExercise10RecordsGreetings(t *testing.T) {
	api := newEx10API(t,
		ex10Greeting("default", "hello", "Ada", "", nil),
		ex10Greeting("shop", "hello", "Grace", "fr", nil),
		ex10Records(map[string]string{"note": "written by someone else"}))
	run := ex10Start(t, api)

	// Both found at start: a finalizer each, then a record each.
	api.waitFor(t, run, "the Greetings there at the start each get the finalizer "+ex10Finalizer+" and then a record", func() bool {
		return api.recordIs("default.hello", "Hello, Ada") && api.recordIs("shop.hello", "Bonjour, Grace") &&
			api.hasFinalizer("default", "hello") && api.hasFinalizer("shop", "hello")
	})

	// A new Greeting, while it runs.
	api.create(t, ex10Greeting("default", "welcome", "Grace Hopper", "es", nil))
	api.waitFor(t, run, "a Greeting created while demo-controller runs gets the finalizer, then the record default.welcome: \"Hola, Grace Hopper\"", func() bool {
		return api.recordIs("default.welcome", "Hola, Grace Hopper") && api.hasFinalizer("default", "welcome")
	})

	// The spec changes: the record follows.
	api.change(t, "default", "hello", func(g *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(g.Object, "de", "spec", "language")
	})
	api.waitFor(t, run, "a Greeting whose language changes to de gets its record written again: default.hello: \"Hallo, Ada\" (the record follows the spec)", func() bool {
		return api.recordIs("default.hello", "Hallo, Ada")
	})

	// A label changes: nothing to write.
	mark := len(run.Lines())
	api.change(t, "default", "hello", func(g *unstructured.Unstructured) { g.SetLabels(map[string]string{"team": "a"}) })
	run.waitForUpdated(t, api, mark, "default/hello", "a label added to default/hello")
	api.barrier(t, run)
	if n := api.recordWrites("default.hello"); n != 2 {
		t.Errorf("demo-controller wrote the record default.hello %d times; want 2: once for \"Hello, Ada\", once for "+
			"\"Hallo, Ada\". Its own finalizer patch comes back as an update, so does a label changed: neither changes the "+
			"record's text, and a write that changes nothing is still a request. Remember what you wrote:\n%s",
			n, api.requestLines(func(r ex10Request) bool { return r.resource == "configmaps" && r.write() }))
	}
	if writes := api.requests(func(r ex10Request) bool {
		return r.write() && r.resource == "greetings" && r.namespace == "default" && r.name == "hello"
	}); len(writes) != 1 {
		t.Errorf("demo-controller wrote the Greeting default/hello %d times; want once, to add its finalizer: once it is "+
			"there, there is nothing to write (a patch that changes nothing is still a request):\n%s", len(writes), ex10Lines(writes))
	}

	// Someone strips the finalizer from a live Greeting: it comes back, and
	// the record, whose text is the same, is not written again.
	api.change(t, "default", "hello", func(g *unstructured.Unstructured) { g.SetFinalizers(nil) })
	api.waitFor(t, run, "default/hello, whose finalizer someone removed by hand while it lives, gets it back: the "+
		"removal comes as an update, and a Greeting with a record must have the finalizer (the task, item 2). Decide "+
		"from the Greeting as it is now, not from whether its record's text changed", func() bool {
		return api.hasFinalizer("default", "hello")
	})
	api.barrier(t, run)
	if n := api.recordWrites("default.hello"); n != 2 {
		t.Errorf("demo-controller wrote the record default.hello %d times; want 2 (\"Hello, Ada\", then \"Hallo, Ada\"): "+
			"putting back the finalizer someone removed changes no text, so the record needs no write:\n%s",
			n, api.requestLines(func(r ex10Request) bool { return r.resource == "configmaps" && r.write() }))
	}

	// Deleted: the record goes, then the finalizer, then the Greeting.
	api.remove(t, "shop", "hello")
	api.waitForGone(t, run, "shop", "hello") // (the other records stay: each write is checked as it is made)
	run.expectLines(t, api,
		`"Greeting recorded" greeting="default/hello" record="default.hello" text="Hello, Ada"`,
		`"Greeting recorded" greeting="shop/hello" record="shop.hello" text="Bonjour, Grace"`,
		`"Greeting recorded" greeting="default/welcome" record="default.welcome" text="Hola, Grace Hopper"`,
		`"Greeting recorded" greeting="default/hello" record="default.hello" text="Hallo, Ada"`,
		`"Greeting record removed" greeting="shop/hello" record="shop.hello"`,
		`"Greeting deleted" greeting="shop/hello"`)
	// Gone: nothing is left to write for it.
	api.barrier(t, run)
	if r, ok := api.removal("shop", "hello"); ok {
		if after := api.requests(func(w ex10Request) bool {
			return w.seq > r.seq && w.resource == "configmaps" && w.write() && strings.Contains(w.body, "shop.hello")
		}); len(after) > 0 {
			t.Errorf("demo-controller wrote the records for shop/hello after the Greeting was gone (its finalizer removed, "+
				"then the Greeting deleted):\n%s\nIts record went before its finalizer did, so nothing is left to remove, and "+
				"a write that changes nothing is still a request (the task, item 1). A Greeting gone from the cache needs "+
				"nothing written: its finalizer saw to its record", ex10Lines(after))
		}
	}
	if got := api.record("note"); got != "written by someone else" {
		t.Errorf("the ConfigMap's key note, which another writer owns, is now %q: write only the keys of Greetings", got)
	}

	// Made again, with the same text: the record was removed, so it is
	// written again.
	api.create(t, ex10Greeting("shop", "hello", "Grace", "fr", nil))
	api.waitFor(t, run, "shop/hello, deleted (its record removed) and then created again with the same spec, gets its record "+
		"shop.hello: \"Bonjour, Grace\" back. demo-controller remembers what it wrote, so as to skip a write that changes "+
		"nothing: once it has removed a record, it must forget that text too, or it skips the new Greeting's record as "+
		"already written", func() bool { return api.recordIs("shop.hello", "Bonjour, Grace") && api.hasFinalizer("shop", "hello") })

	// Every kind of write has been made: the manifest grants exactly those.
	api.checkRights(t, true)
}

// Other controllers' finalizers are kept, even when they change between
// the cache's copy and demo-controller's write; and a finalizer is never
// added to a Greeting being deleted, nor added back after cleanup.
func TestExercise10KeepsOtherFinalizers(t *testing.T) {
	api := newEx10API(t, ex10Greeting("default", "shared", "Ada", "", []string{ex10Other}),
		ex10Greeting("default", "bare", "Grace", "", nil), ex10Records(nil))
	// The first time demo-controller writes the finalizers of
	// default/bare, which has none, another controller adds one just before.
	api.injectOnce("default", "bare", "another controller adds other.example.com/early to a Greeting that had no "+
		"finalizers, just before demo-controller's finalizer write reaches the API server", func(g *unstructured.Unstructured) {
		g.SetFinalizers(append(g.GetFinalizers(), "other.example.com/early"))
	})
	// The first time demo-controller writes the finalizers of
	// default/shared, another controller adds one just before.
	api.injectOnce("default", "shared", "another controller adds other.example.com/early, just before demo-controller's "+
		"finalizer patch reaches the API server", func(g *unstructured.Unstructured) {
		g.SetFinalizers(append(g.GetFinalizers(), "other.example.com/early"))
	})
	run := ex10Start(t, api)
	api.waitFor(t, run, "a Greeting that has another controller's finalizer gets demo-controller's too, beside it, and a record",
		func() bool {
			return api.hasFinalizer("default", "shared") && api.recordIs("default.shared", "Hello, Ada")
		})
	api.waitFor(t, run, "a Greeting to which another controller added a finalizer just before demo-controller's gets "+
		"demo-controller's too, beside it, and a record", func() bool {
		return api.hasFinalizer("default", "bare") && api.recordIs("default.bare", "Hello, Grace") &&
			slices.Contains(api.finalizers("default", "bare"), "other.example.com/early")
	})

	// Deleted: another controller puts its finalizer first just before
	// demo-controller's removal of its own.
	api.injectOnce("default", "shared", "another controller adds other.example.com/late at the start of the list, just "+
		"before demo-controller's finalizer patch reaches the API server", func(g *unstructured.Unstructured) {
		g.SetFinalizers(append([]string{"other.example.com/late"}, g.GetFinalizers()...))
	})
	api.remove(t, "default", "shared")
	api.waitFor(t, run, "a Greeting being deleted loses its record, then demo-controller's finalizer (the others stay, and keep it)",
		func() bool { return !api.hasFinalizer("default", "shared") && !api.hasRecord("default.shared") })
	// The removal comes back as an update: once its sync has begun, the
	// barrier's comes after it, and nothing may be added back.
	run.waitForUpdated(t, api, api.removedAt(ex10Key{"greetings", "default", "shared"}), "default/shared", "demo-controller's removal of its finalizer")
	api.barrier(t, run)
	want := []string{"other.example.com/late", ex10Other, "other.example.com/early"}
	if got := api.finalizers("default", "shared"); !slices.Equal(got, want) {
		t.Errorf("default/shared has the finalizers %q; want %q: demo-controller's patches must leave the others' as they are", got, want)
	}
	// The other controllers finish: the Greeting goes.
	api.change(t, "default", "shared", func(g *unstructured.Unstructured) { g.SetFinalizers(nil) })
	api.waitForGone(t, run, "default", "shared")
}

// Greetings deleted while demo-controller was down are cleaned up when it
// starts: from their state, not from an event (none comes for them).
func TestExercise10CleansUpAfterARestart(t *testing.T) {
	now := metav1.Now()
	deleting := func(g *unstructured.Unstructured) *unstructured.Unstructured {
		g.SetDeletionTimestamp(&now)
		return g
	}
	api := newEx10API(t,
		// Deleted while demo-controller was down; its record is there,
		// written by another field manager (an older version of the
		// controller, or someone by hand: kubectl-create, here).
		deleting(ex10Greeting("default", "left", "Ada", "", []string{ex10Finalizer})),
		// Killed after it removed the record, before it removed the finalizer.
		deleting(ex10Greeting("default", "half", "Grace", "", []string{ex10Finalizer})),
		// Created and deleted while it was down: never got the finalizer;
		// another controller's holds it.
		deleting(ex10Greeting("default", "never", "Alan", "", []string{ex10Other})),
		ex10Records(map[string]string{"default.left": "Hello, Ada"}))
	run := ex10Start(t, api)
	api.waitForGone(t, run, "default", "left")
	api.waitForGone(t, run, "default", "half")
	api.barrier(t, run)
	if got := api.finalizers("default", "never"); !slices.Equal(got, []string{ex10Other}) {
		t.Errorf("default/never, deleted before demo-controller ever saw it, has the finalizers %q; want only %q", got, ex10Other)
	}
}

// Where the records' ConfigMap is missing, a record cannot be written: the
// error is retried a few times, not for ever; and cleanup still succeeds
// (no ConfigMap, no record).
func TestExercise10WithoutTheConfigMap(t *testing.T) {
	now := metav1.Now()
	gone := ex10Greeting("default", "gone", "Ada", "", []string{ex10Finalizer})
	gone.SetDeletionTimestamp(&now)
	api := newEx10API(t, ex10Greeting("default", "hello", "Ada", "", nil), gone)
	run := ex10Start(t, api)
	api.waitForGone(t, run, "default", "gone")
	api.waitFor(t, run, "a record write answered 404 (no ConfigMap demo-controller/greetings) fails", func() bool {
		return len(api.requests(func(r ex10Request) bool { return r.resource == "configmaps" && r.write() && r.code == 404 })) > 0
	})
	// One change, one write and at most maxRetries retries: watch for
	// twice as long as those take.
	time.Sleep(time.Second)
	writes := api.requests(func(r ex10Request) bool {
		return r.resource == "configmaps" && r.write() && strings.Contains(r.body, "default.hello")
	})
	if len(writes) > 1+maxRetries {
		t.Errorf("the ConfigMap demo-controller/greetings is missing, and demo-controller tried %d times in a second to "+
			"write the record of default/hello: return the error, and let the queue retry it at most maxRetries (%d) "+
			"times, as for pods (AddRateLimited while NumRequeues is under the cap, then Forget), with one line that "+
			"says what to do. The last requests:\n%s", len(writes), maxRetries, ex10Lines(writes[max(0, len(writes)-6):]))
	}
	// One line that says what is wrong (the API server's words) and what to do.
	said := func() []string {
		return slices.DeleteFunc(run.Lines(), func(l string) bool {
			return !strings.Contains(l, `configmaps \"greetings\" not found`) || !strings.Contains(l, "demo-controller.yaml")
		})
	}
	api.waitUntil(t, run, func() bool { return len(said()) > 0 }, func() string {
		if writes := api.requests(func(r ex10Request) bool {
			return r.resource == "configmaps" && r.write() && strings.Contains(r.body, "default.hello")
		}); len(writes) > 0 && len(writes) < 1+maxRetries {
			recorded := slices.IndexFunc(run.Lines(), func(l string) bool {
				return strings.HasPrefix(l, `"Greeting recorded" greeting="default/hello"`)
			})
			if recorded >= writes[0].linesAt {
				return fmt.Sprintf("the ConfigMap demo-controller/greetings is missing; demo-controller tried to write the record "+
					"of default/hello once (%s), then logged \"Greeting recorded\" for it, and never tried again: it took the "+
					"404 for success. A 404 means success only for a removal (no ConfigMap, no record); a record write that gets "+
					"it has failed: return the error, with what to do (create it: demo-controller.yaml does), and the key is "+
					"retried at most maxRetries times. Its last lines:\n  %s", writes[0], strings.Join(fakeapi.LastLines(run.Lines(), 8), "\n  "))
			}
			if recorded >= 0 {
				return fmt.Sprintf("the ConfigMap demo-controller/greetings is missing; demo-controller tried to write the record "+
					"of default/hello %s (%s), and never again, and logged \"Greeting recorded\" for it: its retry "+
					"skipped the write, so the queue never gave up, and nothing said what is wrong. Remember a record's text "+
					"(and log it) only once its write has succeeded: remembered before, the retry finds it already written. "+
					"Its last lines:\n  %s", ex10Times(len(writes)), writes[0], strings.Join(fakeapi.LastLines(run.Lines(), 8), "\n  "))
			}
			return fmt.Sprintf("the ConfigMap demo-controller/greetings is missing; demo-controller tried to write the record "+
				"of default/hello %s (%s), and never again: its retries did nothing, so the queue never gave up, and "+
				"nothing said what is wrong. A retry finds the Greeting as the failed sync found it, often at the same "+
				"resourceVersion: exercise 7's lines depend on what changed since the last sync, but the finalizer and the "+
				"record must be brought in step at every sync, retries included (the task, item 6). Its last lines:\n  %s",
				ex10Times(len(writes)), writes[0], strings.Join(fakeapi.LastLines(run.Lines(), 8), "\n  "))
		}
		return fmt.Sprintf("the ConfigMap demo-controller/greetings is missing, and within %v demo-controller logged no line "+
			"that says so in the API server's words (configmaps \"greetings\" not found) and what to do (create it: "+
			"demo-controller.yaml does). Return the error with that advice wrapped around it; the worker logs it once it gives "+
			"up. Its last lines:\n  %s", ex10Wait, strings.Join(fakeapi.LastLines(run.Lines(), 8), "\n  "))
	})
	if n := len(said()); n > 2 {
		t.Errorf("demo-controller said %d times that the ConfigMap is missing, for one Greeting: say it once, when the queue gives up", n)
	}
	if posts := api.requests(func(r ex10Request) bool { return r.resource == "configmaps" && r.method == "POST" }); len(posts) > 0 {
		t.Errorf("demo-controller created a ConfigMap (%s): the task's manifest creates demo-controller/greetings; the "+
			"controller only patches its keys (RBAC cannot limit a create to one name)", posts[0])
	}
}

// A write the API server refuses for no fault of the controller's (an etcd
// timeout: 500) is returned and retried; what comes after it waits: the
// record waits for the finalizer, and the finalizer's removal for the
// record's.
func TestExercise10RetriesRefusedWrites(t *testing.T) {
	api := newEx10API(t, ex10Greeting("default", "hello", "Ada", "", nil), ex10Records(nil))
	api.failures = append(api.failures, func(req ex10Request, cur, next map[string]any) bool {
		return req.resource == "greetings" && req.name == "hello" &&
			!slices.Contains(ex10Finalizers(cur), ex10Finalizer) && slices.Contains(ex10Finalizers(next), ex10Finalizer)
	})
	run := ex10Start(t, api)
	api.waitFor(t, run, "a Greeting whose first finalizer write was refused (500) gets the finalizer on a retry, then its record",
		func() bool {
			return api.hasFinalizer("default", "hello") && api.recordIs("default.hello", "Hello, Ada")
		})

	api.Lock()
	api.failures = append(api.failures, func(req ex10Request, cur, next map[string]any) bool {
		_, had := fakeapi.Data(cur)["default.hello"]
		_, has := fakeapi.Data(next)["default.hello"]
		return req.resource == "configmaps" && had && !has
	})
	api.Unlock()
	api.remove(t, "default", "hello")
	api.waitForGone(t, run, "default", "hello")
	if api.hasRecord("default.hello") {
		t.Errorf("default/hello is gone, and its record is still there")
	}
	removed := slices.DeleteFunc(run.Lines(), func(l string) bool {
		return !strings.HasPrefix(l, `"Greeting record removed" greeting="default/hello"`)
	})
	if len(removed) != 1 {
		t.Fatalf("demo-controller logged \"Greeting record removed\" for default/hello %d times; want once: its first "+
			"removal of the record was refused (500), and only its retry removed it. Log the line after a removal that "+
			"succeeded, never before its write (the task, item 7):\n%s", len(removed), api.requestLines(func(r ex10Request) bool {
			return r.resource == "configmaps" && r.write() && strings.Contains(r.body, "default.hello")
		}))
	}

	// Made again, without the ConfigMap: its record write fails at every
	// try, and the queue gives up after maxRetries retries, counted from
	// 0: the key's earlier failures, each followed by a success, are forgotten.
	api.Lock()
	api.RemoveLocked("configmaps", ex10RecordNS, ex10RecordName)
	mark := api.seqLocked()
	api.Unlock()
	api.create(t, ex10Greeting("default", "hello", "Ada", "", nil))
	api.waitUntil(t, run, func() bool {
		return slices.ContainsFunc(run.Lines(), func(l string) bool {
			return strings.Contains(l, `configmaps \"greetings\" not found`) && strings.Contains(l, "demo-controller.yaml")
		})
	}, func() string {
		return fmt.Sprintf("default/hello was made again while the ConfigMap demo-controller/greetings is missing, and within "+
			"%v demo-controller did not give up on it with a line that says so (configmaps \"greetings\" not found) and "+
			"what to do (demo-controller.yaml). Its last lines:\n  %s", ex10Wait, strings.Join(fakeapi.LastLines(run.Lines(), 8), "\n  "))
	})
	writes := api.requests(func(r ex10Request) bool {
		return r.seq > mark && r.resource == "configmaps" && r.write() && strings.Contains(r.body, "default.hello")
	})
	if len(writes) != 1+maxRetries {
		t.Errorf("default/hello, made again while the ConfigMap demo-controller/greetings is missing, had its record write "+
			"tried %d times before demo-controller gave up; want 1 + maxRetries (%d), as for pods. Earlier, the key "+
			"default/hello failed twice (a finalizer write and a record removal refused with a 500), and each time its "+
			"retry succeeded: a sync that succeeds must be followed by Forget, or the queue keeps counting the key's old "+
			"failures (NumRequeues), and gives up on its next ones sooner. Its writes:\n%s", len(writes), 1+maxRetries, ex10Lines(writes))
	}
}

// demo-controller.yaml grants what the controller uses, and nothing more.
func TestExercise10Manifest(t *testing.T) {
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// By group/resource, the ClusterRole's verbs.
	cluster, _ := fakeapi.Grants(t, "demo-controller.yaml")
	var records []rbacv1.PolicyRule // rules on configmaps in namespaced Roles
	var roleNS []string
	var configMap *corev1.ConfigMap
	bound := map[string]bool{} // Roles bound to demo-controller's ServiceAccount, by namespace/name
	namespaced := false        // the Namespace demo-controller comes before this point of the file
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			namespaced = namespaced || o.Name == ex10RecordNS
		case *rbacv1.Role:
			for _, rule := range o.Rules {
				if slices.Contains(rule.Resources, "configmaps") {
					records = append(records, rule)
					roleNS = append(roleNS, o.Namespace+"/"+o.Name)
				}
			}
		case *rbacv1.RoleBinding:
			for _, s := range o.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == "demo-controller" && s.Namespace == "demo-controller" && o.RoleRef.Kind == "Role" {
					bound[o.Namespace+"/"+o.RoleRef.Name] = true
				}
			}
		case *corev1.ConfigMap:
			if o.Namespace == ex10RecordNS && o.Name == ex10RecordName {
				configMap = o
				if !namespaced {
					t.Errorf("demo-controller.yaml has the ConfigMap demo-controller/greetings before the Namespace " +
						"demo-controller: kubectl create -f creates the objects in the file's order, one request each, so " +
						"on a cluster without that namespace the ConfigMap is refused (namespaces \"demo-controller\" not " +
						"found), and the controller finds no ConfigMap to write. Put it after the Namespace (the task, item 8)")
				}
			}
		}
	}
	greetings := cluster["demo.example.com/greetings"]
	switch {
	case !slices.Contains(greetings, "patch") && !slices.Contains(greetings, "update"):
		t.Errorf("demo-controller.yaml's ClusterRole grants %q on greetings: to add and remove its finalizer the controller "+
			"writes Greetings, with patch (or update, if it updates them): add that verb", greetings)
	case len(slices.DeleteFunc(slices.Clone(greetings), func(v string) bool {
		return slices.Contains([]string{"list", "watch", "patch", "update"}, v)
	})) > 0 || !slices.Contains(greetings, "list") || !slices.Contains(greetings, "watch"):
		t.Errorf("demo-controller.yaml's ClusterRole grants %q on greetings: list and watch (the informer), and patch "+
			"or update (the finalizer) are what the controller uses; nothing more", greetings)
	}
	for key := range cluster {
		if strings.HasSuffix(key, "/configmaps") || key == "*/*" || strings.HasSuffix(key, "/*") {
			t.Errorf("demo-controller.yaml's ClusterRole grants %q on %s: in every namespace. The records are one ConfigMap in "+
				"namespace demo-controller: grant its verbs in a Role there, limited by resourceNames to greetings", cluster[key], key)
		}
	}
	if configMap == nil {
		t.Errorf("demo-controller.yaml has no ConfigMap greetings in namespace demo-controller: the manifest creates it " +
			"(after the Namespace), and the controller only patches its keys")
	}
	if len(records) == 0 {
		t.Errorf("demo-controller.yaml has no Role that grants anything on configmaps: the controller patches the keys of " +
			"demo-controller/greetings. Add a Role in namespace demo-controller, with resourceNames: [greetings], and a " +
			"RoleBinding to the ServiceAccount demo-controller")
	}
	for i, rule := range records {
		verbs := slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "patch" || v == "update" || v == "get" })
		switch {
		case strings.HasPrefix(roleNS[i], "/"):
			t.Errorf("the Role %s grants %q on configmaps, and has no namespace: kubectl create -f puts it in the current "+
				"namespace (default, on most clusters), not in demo-controller, where the records are. Give it, and its "+
				"RoleBinding, namespace: demo-controller", roleNS[i][1:], rule.Verbs)
		case !strings.HasPrefix(roleNS[i], ex10RecordNS+"/"):
			t.Errorf("the Role %s grants %q on configmaps outside namespace demo-controller, where the records are", roleNS[i], rule.Verbs)
		case !slices.Equal(rule.ResourceNames, []string{ex10RecordName}):
			t.Errorf("the Role %s grants %q on configmaps %s: limit it to the one the controller writes, with resourceNames: [greetings]",
				roleNS[i], rule.Verbs, map[bool]string{true: "of any name", false: fmt.Sprintf("%q", rule.ResourceNames)}[len(rule.ResourceNames) == 0])
		case len(verbs) > 0:
			t.Errorf("the Role %s grants %q on the ConfigMap greetings: the controller patches keys of it (patch; update if it "+
				"updates it), and does nothing else with it. %q is more than it uses (create cannot be limited by name at "+
				"all; the manifest creates the ConfigMap)", roleNS[i], rule.Verbs, verbs)
		case !bound[roleNS[i]]:
			t.Errorf("the Role %s is bound to no RoleBinding for the ServiceAccount demo-controller/demo-controller", roleNS[i])
		}
	}
	if got := cluster["/pods"]; !slices.Equal(got, []string{"list", "watch"}) {
		t.Errorf("demo-controller.yaml's ClusterRole grants %q on pods; want list and watch, as before", got)
	}
}

// checkRights compares the verbs that demo-controller sent, on greetings
// and on the ConfigMap demo-controller/greetings, with those that
// demo-controller.yaml, as the solution leaves it, grants its
// ServiceAccount there. A verb sent and not granted is a 403 on a real
// cluster. With unused (once the test has seen every kind of write), a
// verb granted and never sent is reported too.
func (api *ex10API) checkRights(t *testing.T, unused bool) {
	t.Helper()
	api.rightsChecked = true
	granted := ex10Granted(t)
	sent := map[string]map[string]bool{"greetings": {}, "the ConfigMap greetings": {}}
	for _, r := range api.requests(func(r ex10Request) bool { return true }) {
		switch {
		case r.resource == "greetings":
			sent["greetings"][r.verb] = true
		case r.resource == "configmaps" && r.namespace == ex10RecordNS && r.name == ex10RecordName:
			sent["the ConfigMap greetings"][r.verb] = true
		}
	}
	for _, on := range []string{"greetings", "the ConfigMap greetings"} {
		grants := func(verb string) bool { return slices.Contains(granted[on], verb) || slices.Contains(granted[on], "*") }
		only := "only " + strings.Join(granted[on], ", ")
		if len(granted[on]) == 0 {
			only = "nothing"
		}
		for _, verb := range slices.Sorted(maps.Keys(sent[on])) {
			if !grants(verb) {
				t.Errorf("the code sends %s on %s, but demo-controller.yaml grants %s there: on a real cluster, the API "+
					"server answers 403 Forbidden.%s Grant exactly the verbs the code sends (the task, item 8)",
					verb, on, only, ex10NoNamespace(t, on))
			}
		}
		if !unused {
			continue
		}
		for _, verb := range granted[on] {
			if verb != "list" && verb != "watch" && !sent[on][verb] {
				t.Errorf("demo-controller.yaml grants %s on %s, but the code never sends it (it sends %s): grant exactly the "+
					"verbs the code sends, and no more (the task, item 8)", verb, on, strings.Join(slices.Sorted(maps.Keys(sent[on])), ", "))
			}
		}
	}
}

// ex10NoNamespace names, for a message about the ConfigMap greetings, the
// Roles and RoleBindings of demo-controller.yaml that have no namespace;
// or returns "".
func ex10NoNamespace(t *testing.T, on string) string {
	t.Helper()
	if on != "the ConfigMap greetings" {
		return ""
	}
	var names []string
	for _, obj := range ex10Manifest(t) {
		switch o := obj.(type) {
		case *rbacv1.Role:
			if o.Namespace == "" {
				names = append(names, "the Role "+o.Name)
			}
		case *rbacv1.RoleBinding:
			if o.Namespace == "" {
				names = append(names, "the RoleBinding "+o.Name)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf(" %s %s no namespace: kubectl create -f puts an object without one in the current namespace "+
		"(default, on most clusters), not in demo-controller, where the ConfigMap is. Give each namespace: demo-controller.",
		ex10Capital(strings.Join(names, " and ")), map[bool]string{true: "has", false: "have"}[len(names) == 1])
}

func ex10Capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// ex10Manifest returns the objects of demo-controller.yaml, in its order.
func ex10Manifest(t *testing.T) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// ex10Granted reads demo-controller.yaml and returns the verbs it grants
// the ServiceAccount demo-controller/demo-controller on greetings (through
// ClusterRoles bound to it) and on the ConfigMap demo-controller/greetings
// (through those, and Roles of namespace demo-controller bound to it),
// from the rules that match by group, resource and name.
func ex10Granted(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles, roles := map[string][]rbacv1.PolicyRule{}, map[string][]rbacv1.PolicyRule{}
	var clusterBound, bound, boundHere []string // ClusterRoles bound everywhere; Roles, ClusterRoles bound in demo-controller
	ours := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == "demo-controller" && s.Namespace == "demo-controller"
		})
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[o.Name] = o.Rules
		case *rbacv1.Role:
			if o.Namespace == ex10RecordNS {
				roles[o.Name] = o.Rules
			}
		case *rbacv1.ClusterRoleBinding:
			if ours(o.Subjects) {
				clusterBound = append(clusterBound, o.RoleRef.Name)
			}
		case *rbacv1.RoleBinding:
			if o.Namespace == ex10RecordNS && ours(o.Subjects) {
				if o.RoleRef.Kind == "ClusterRole" {
					boundHere = append(boundHere, o.RoleRef.Name)
				} else {
					bound = append(bound, o.RoleRef.Name)
				}
			}
		}
	}
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	verbs := func(rules []rbacv1.PolicyRule, group, resource, name string) []string {
		var vs []string
		for _, r := range rules {
			if has(r.APIGroups, group) && has(r.Resources, resource) && (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
				vs = append(vs, r.Verbs...)
			}
		}
		return vs
	}
	granted := map[string][]string{}
	for _, name := range clusterBound {
		granted["greetings"] = append(granted["greetings"], verbs(clusterRoles[name], "demo.example.com", "greetings", "")...)
		granted["the ConfigMap greetings"] = append(granted["the ConfigMap greetings"], verbs(clusterRoles[name], "", "configmaps", ex10RecordName)...)
	}
	for _, name := range boundHere {
		granted["the ConfigMap greetings"] = append(granted["the ConfigMap greetings"], verbs(clusterRoles[name], "", "configmaps", ex10RecordName)...)
	}
	for _, name := range bound {
		granted["the ConfigMap greetings"] = append(granted["the ConfigMap greetings"], verbs(roles[name], "", "configmaps", ex10RecordName)...)
	}
	for on, vs := range granted {
		granted[on] = slices.Compact(slices.Sorted(slices.Values(vs)))
	}
	return granted
}

// ex10Greeting returns a Greeting as the API server would hold it.
func ex10Greeting(namespace, name, to, language string, finalizers []string) *unstructured.Unstructured {
	spec := map[string]any{"to": to}
	if language != "" {
		spec["language"] = language
	}
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
		"metadata": map[string]any{"namespace": namespace, "name": name, "uid": "uid-" + namespace + "-" + name, "generation": int64(1)},
		"spec":     spec,
	}}
	g.SetFinalizers(finalizers)
	return g
}

// ex10Records returns the records' ConfigMap with data.
func ex10Records(data map[string]string) *unstructured.Unstructured {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ex10RecordNS, "name": ex10RecordName, "uid": "uid-records"},
	}}
	if data != nil {
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		cm.Object["data"] = d
	}
	return cm
}

// ex10Run is a run of run, and what it logs.
type ex10Run struct{ *fakeapi.Run }

// ex10Start runs run, as demo-controller does, against api until the test
// ends, logging at verbosity 2 (client-go's "Caches populated" lines).
func ex10Start(t *testing.T, api *ex10API) *ex10Run {
	t.Helper()
	o := options{kubeconfig: writeKubeconfig(t, api.URL, bearer, false), startupTimeout: ex10Wait, syncTimeout: ex10Wait}
	started := make(chan *fakeapi.Run, 1)
	r := &ex10Run{fakeapi.Start(t, ex10Wait, 15, func(ctx context.Context) error {
		logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(<-started), textlogger.Verbosity(2)))
		return run(klog.NewContext(ctx, logger), o)
	})}
	started <- r.Run
	api.Lock()
	api.logLines = func() int { return len(r.Lines()) }
	api.Unlock()
	// Run before Start's cleanup (which logs the last lines if the test failed).
	t.Cleanup(func() {
		r.Stop(t)
		if !t.Failed() && !api.rightsChecked {
			api.checkRights(t, false)
		}
	})
	return r
}

// waitForUpdated waits for exercise 7's "Greeting updated" line for the
// Greeting, logged after line from: the sync of the change has begun, so a
// key queued now is handled after it.
func (r *ex10Run) waitForUpdated(t *testing.T, api *ex10API, from int, greeting, change string) {
	t.Helper()
	want := `"Greeting updated" greeting="` + greeting + `"`
	api.waitUntil(t, r, func() bool { return len(r.Matching(from, want)) > 0 }, func() string {
		return fmt.Sprintf("after %s, demo-controller did not log %s within %v: exercise 7's lines stay, and a Greeting "+
			"changed is logged \"Greeting updated\" (its resourceVersion changed). Its last lines:\n  %s",
			change, want, ex10Wait, strings.Join(fakeapi.LastLines(r.LinesFrom(from), 8), "\n  "))
	})
}

// expectLines checks that, for each of wants, a line starts with it.
func (r *ex10Run) expectLines(t *testing.T, api *ex10API, wants ...string) {
	t.Helper()
	var missing []string
	api.waitUntil(t, r, func() bool {
		missing = r.Missing(0, wants...)
		return len(missing) == 0
	}, func() string {
		return fmt.Sprintf("demo-controller did not log (the task, what the log shows):\n  %s\nits lines about Greetings:\n  %s",
			strings.Join(missing, "\n  "), strings.Join(fakeapi.LastLines(r.Matching(0, `"Greeting `), 12), "\n  "))
	})
}

// ex10Key names an object the API server holds.
type ex10Key struct{ resource, namespace, name string }

// ex10Request is what the API server notes of a request.
type ex10Request struct {
	seq                            int
	method, contentType            string
	verb                           string // as RBAC names it: get, list, watch, patch, update, create, delete
	resource, namespace, name      string
	body                           string
	code                           int
	message                        string // the answer's message, when refused
	finalizersBefore, finalizersAt []string
	dataBefore, dataAfter          map[string]string
	linesAt                        int // how many lines demo-controller had logged when it was answered
}

func (r ex10Request) write() bool {
	return r.method == "PATCH" || r.method == "PUT" || r.method == "POST" || r.method == "DELETE"
}

func (r ex10Request) String() string {
	s := fmt.Sprintf("%s %s %s/%s", r.method, r.resource, r.namespace, r.name)
	if r.contentType != "" && r.method != "GET" {
		s += " (" + r.contentType + ")"
	}
	if r.body != "" {
		s += " " + ex10Cut(r.body, 200)
	}
	s += fmt.Sprintf(": %d", r.code)
	if r.message != "" {
		s += " " + r.message
	}
	return s
}

// ex10LastLines returns the last n of lines, or "(none)".
func ex10Cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func ex10Lines(rs []ex10Request) string {
	if len(rs) == 0 {
		return "  (none)"
	}
	lines := make([]string, len(rs))
	for i, r := range rs {
		lines[i] = "  " + r.String()
	}
	return strings.Join(lines, "\n")
}

// ex10API is an API server, over HTTP, that serves pods (none), Greetings
// and ConfigMaps as kube-apiserver v1.36 with the Greeting CRD does, for
// what the task needs: lists, watches, gets, JSON merge patches, JSON
// patches, strategic merge patches and server-side apply of ConfigMaps,
// updates and creates. It keeps a Greeting that has finalizers when it is
// deleted (deletionTimestamp set), and deletes it once its last finalizer
// is removed. It checks each write against the task's rules as it is made,
// and notes the first broken one.
// ex10API is a *fakeapi.Server that serves pods (none), Greetings and
// ConfigMaps, and answers their writes as kube-apiserver v1.36 with the
// Greeting CRD does, for what the task needs: JSON merge patches, JSON
// patches, strategic merge patches and server-side apply of ConfigMaps,
// updates and creates. It keeps a Greeting that has finalizers when it is
// deleted (deletionTimestamp set), and deletes it once its last finalizer
// is removed (fakeapi's UpdateLocked and DeleteLocked). It checks each
// write against the task's rules as it is made, and notes the first broken
// one.
type ex10API struct {
	*fakeapi.Server

	broken   string                           // the first rule broken, in the task's words
	managers map[string]map[string]bool       // server-side apply: the data keys of the records each field manager owns
	applied  func()                           // the ownership a server-side apply being served takes, once it succeeds
	inject   map[ex10Key]func(map[string]any) // changes made just before demo-controller's next finalizer write
	injected map[ex10Key]string
	deleted  map[ex10Key]int // the request number at which a Greeting's deletion began (0: before the start)
	logLines func() int      // how many lines demo-controller has logged
	// rightsChecked: the test has compared the verbs sent with the manifest's.
	rightsChecked bool
	created       map[ex10Key]int // how many times a Greeting was created by the test
	// failures refuse, once each, the first write that matches, with a
	// 500, as a real API server may (an etcd timeout).
	failures []func(req ex10Request, cur, next map[string]any) bool
	removed  map[ex10Key]int             // how many it had logged when its finalizer's removal from a Greeting was answered
	texts    map[ex10Key]map[string]bool // what each Greeting has said, by its specs so far
	notes    map[int]ex10Request         // by request number: what Write notes of a write
	barriers int
}

func newEx10API(t *testing.T, objects ...*unstructured.Unstructured) *ex10API {
	api := &ex10API{Server: fakeapi.New(t, "pods", "greetings", "configmaps"), managers: map[string]map[string]bool{},
		inject: map[ex10Key]func(map[string]any){}, injected: map[ex10Key]string{}, deleted: map[ex10Key]int{},
		removed: map[ex10Key]int{}, logLines: func() int { return 0 }, created: map[ex10Key]int{},
		texts: map[ex10Key]map[string]bool{}, notes: map[int]ex10Request{}}
	api.Write = api.write
	for _, o := range objects {
		key := ex10KeyOf(o.Object)
		api.Store(key.resource, o.Object)
		api.noteText(key, o.Object)
		if o.GetKind() == "ConfigMap" {
			api.managers["kubectl-create"] = map[string]bool{}
			for k := range fakeapi.Data(o.Object) {
				api.managers["kubectl-create"][k] = true
			}
		}
	}
	return api
}

func ex10KeyOf(obj map[string]any) ex10Key {
	resource := map[string]string{"Greeting": "greetings", "ConfigMap": "configmaps", "Pod": "pods"}[fmt.Sprint(obj["kind"])]
	return ex10Key{resource, fakeapi.Meta(obj, "namespace"), fakeapi.Meta(obj, "name")}
}

// objLocked returns the object stored under key (nil: none); it is the
// store's own: copy it to change it.
func (api *ex10API) objLocked(key ex10Key) map[string]any {
	return api.ObjectLocked(key.resource, key.namespace+"/"+key.name)
}

// seqLocked is the number of requests so far: a request's number (seq) is
// one more than the requests before it.
func (api *ex10API) seqLocked() int { return len(api.RequestsLocked(0)) }

// requestsLocked returns every request so far, with what Write noted of
// each write.
func (api *ex10API) requestsLocked() []ex10Request {
	var rs []ex10Request
	for i, r := range api.RequestsLocked(0) {
		req, ok := api.notes[i+1]
		if !ok {
			req = ex10Request{method: ex10Method(r.Verb), contentType: r.ContentType, verb: r.Verb, resource: r.Resource,
				namespace: r.Namespace, name: r.Name}
		}
		req.seq, req.code = i+1, r.Code
		rs = append(rs, req)
	}
	return rs
}

// ex10Method is the HTTP method of a request of fakeapi's verb.
func ex10Method(verb string) string {
	return map[string]string{"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT", "patch": "PATCH",
		"apply": "PATCH", "delete": "DELETE"}[verb]
}

// ex10Status is the API server's answer that refuses a request, as it
// sends it.
func ex10Status(code int, reason, message string) (int, any) {
	return code, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReason(reason), Code: int32(code), Message: message}
}

func ex10NotFound(r ex10Request) string {
	if r.resource == "greetings" {
		return fmt.Sprintf("greetings.demo.example.com %q not found", r.name)
	}
	return fmt.Sprintf("%s %q not found", r.resource, r.name)
}

// ex10Refusal is an answer other than success.
type ex10Refusal struct {
	code            int
	reason, message string
}

// write answers every write (fakeapi's Write), with the server's lock
// held, and notes it (api.notes).
func (api *ex10API) write(r *fakeapi.Request) (int, any) {
	req := ex10Request{method: ex10Method(r.Verb), contentType: r.ContentType, verb: r.Verb, resource: r.Resource,
		namespace: r.Namespace, name: r.Name, body: string(r.Body)}
	if req.verb == "apply" {
		req.verb = "patch" // as RBAC names it
	}
	if strings.HasPrefix(req.body, "k8s\x00") {
		if obj, err := fakeapi.Decode(r.Body); err == nil {
			data, _ := json.Marshal(obj)
			req.body = string(data)
		}
	}
	seq := api.seqLocked() + 1
	answer := func(code int, reason, message string) (int, any) {
		req.message = message
		req.linesAt = api.logLines()
		api.notes[seq] = req
		return ex10Status(code, reason, message)
	}
	switch {
	case r.Subresource != "" || !slices.Contains([]string{"pods", "greetings", "configmaps"}, r.Resource):
		return answer(http.StatusNotFound, "NotFound", "the server could not find the requested resource")
	case r.Resource == "pods":
		return answer(http.StatusMethodNotAllowed, "MethodNotAllowed", "demo-controller writes no pods")
	}
	key := ex10Key{req.resource, req.namespace, req.name}
	cur := api.objLocked(key)
	api.applied = nil
	// Another controller's change, just before demo-controller's finalizer write.
	if f := api.inject[key]; f != nil && req.resource == "greetings" && cur != nil {
		if next, refusal := api.apply(req, r.Query, cur, r.Body); refusal == nil && !slices.Equal(ex10Finalizers(next), ex10Finalizers(cur)) {
			delete(api.inject, key)
			changed := fakeapi.Copy(cur)
			f(changed)
			api.storeLocked(key, cur, changed)
			cur = api.objLocked(key)
		}
	}
	next, refusal := api.apply(req, r.Query, cur, r.Body)
	if refusal == nil && req.resource == "greetings" {
		refusal = api.checkGreeting(req, cur, next)
	}
	for i, fail := range api.failures {
		if refusal == nil && fail(req, cur, next) {
			api.failures = slices.Delete(api.failures, i, i+1)
			refusal = &ex10Refusal{500, "InternalError", "Internal error occurred: etcdserver: request timed out"}
			break
		}
	}
	if refusal == nil && req.resource == "configmaps" && cur != nil && next != nil {
		if rv := fakeapi.Meta(next, "resourceVersion"); rv != "" && rv != fakeapi.Meta(cur, "resourceVersion") {
			refusal = &ex10Refusal{409, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on configmaps %q: the object has been modified; please apply your changes to the latest version and try again", req.name)}
		}
	}
	req.finalizersBefore, req.dataBefore = ex10Finalizers(cur), fakeapi.Data(cur)
	if refusal != nil {
		code, status := answer(refusal.code, refusal.reason, refusal.message)
		api.judgeRefusal(req, cur, refusal)
		return code, status
	}
	req.finalizersAt, req.dataAfter = ex10Finalizers(next), fakeapi.Data(next)
	api.judgeWrite(req, cur, next)
	if api.applied != nil {
		api.applied()
	}
	for k := range req.dataBefore {
		if _, kept := req.dataAfter[k]; !kept {
			for _, owned := range api.managers {
				delete(owned, k)
			}
		}
	}
	if req.method == "DELETE" {
		api.RemoveLocked(key.resource, key.namespace, key.name)
	} else {
		api.storeLocked(key, cur, next)
	}
	req.linesAt = api.logLines()
	api.notes[seq] = req
	if slices.Contains(req.finalizersBefore, ex10Finalizer) && !slices.Contains(req.finalizersAt, ex10Finalizer) {
		api.removed[key] = api.logLines()
	}
	if stored := api.objLocked(key); stored != nil {
		next = stored
	}
	return http.StatusOK, next
}

// apply returns the object the request would leave, or the API server's refusal.
func (api *ex10API) apply(req ex10Request, query url.Values, cur map[string]any, body []byte) (map[string]any, *ex10Refusal) {
	notFound := &ex10Refusal{404, "NotFound", ex10NotFound(req)}
	mediaType := strings.TrimSpace(strings.Split(req.contentType, ";")[0])
	switch {
	case req.method == "DELETE":
		if cur == nil {
			return nil, notFound
		}
		return cur, nil
	case req.method == "POST":
		if cur != nil {
			return nil, &ex10Refusal{409, "AlreadyExists", fmt.Sprintf("%s %q already exists", req.resource, req.name)}
		}
		obj, err := fakeapi.Decode(body)
		if err != nil {
			return nil, &ex10Refusal{400, "BadRequest", err.Error()}
		}
		return obj, nil
	case req.method == "PUT":
		if cur == nil {
			return nil, notFound
		}
		obj, err := fakeapi.Decode(body)
		if err != nil {
			return nil, &ex10Refusal{400, "BadRequest", err.Error()}
		}
		rv, _, _ := unstructured.NestedString(obj, "metadata", "resourceVersion")
		if rv == "" && req.resource == "greetings" {
			return nil, &ex10Refusal{422, "Invalid", fmt.Sprintf("greetings.demo.example.com %q is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update", req.name)}
		}
		return obj, nil
	case mediaType == "application/apply-patch+yaml" && req.resource == "configmaps":
		return api.serverSideApply(req, query, cur, body)
	case cur == nil:
		return nil, notFound
	}
	original, _ := json.Marshal(cur)
	var patched []byte
	var err error
	switch mediaType {
	case "application/merge-patch+json":
		patched, err = jsonpatch.MergePatch(original, body)
	case "application/json-patch+json":
		var patch jsonpatch.Patch
		if patch, err = jsonpatch.DecodePatch(body); err == nil {
			patched, err = patch.Apply(original)
		}
		if err != nil {
			return nil, &ex10Refusal{422, "Invalid", "the server rejected our request due to an error in our request"}
		}
	case "application/strategic-merge-patch+json":
		if req.resource == "greetings" {
			return nil, &ex10Refusal{415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"}
		}
		patched, err = strategicpatch.StrategicMergePatch(original, body, corev1.ConfigMap{})
	case "application/apply-patch+yaml":
		return nil, &ex10Refusal{415, "UnsupportedMediaType", "this test's API server does not serve server-side apply of Greetings " +
			"(a real one does): write the finalizers as the task says, with a JSON merge patch that carries the resourceVersion, " +
			"a JSON patch whose test op checks the list, or an update"}
	default:
		return nil, &ex10Refusal{415, "UnsupportedMediaType", "unknown patch type " + mediaType}
	}
	if err != nil {
		return nil, &ex10Refusal{400, "BadRequest", err.Error()}
	}
	var obj map[string]any
	if err := json.Unmarshal(patched, &obj); err != nil {
		return nil, &ex10Refusal{400, "BadRequest", err.Error()}
	}
	return obj, nil
}

// serverSideApply applies a ConfigMap's data as kube-apiserver does, for
// the data keys: a field manager owns the keys it applied; keys it applied
// before and leaves out now are removed, unless another manager owns them
// too (measured on kube-apiserver v1.36: applying {b.hello} after
// {a.hello}, as one field manager, removes a.hello).
func (api *ex10API) serverSideApply(req ex10Request, query url.Values, cur map[string]any, body []byte) (map[string]any, *ex10Refusal) {
	manager := query.Get("fieldManager")
	if manager == "" {
		return nil, &ex10Refusal{422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"}
	}
	var applied map[string]any
	if err := yaml.Unmarshal(body, &applied); err != nil {
		return nil, &ex10Refusal{400, "BadRequest", err.Error()}
	}
	data, _, _ := unstructured.NestedStringMap(applied, "data")
	next := fakeapi.Copy(cur)
	if next == nil {
		next = applied
	}
	old := fakeapi.Data(cur)
	force := query.Get("force") == "true"
	for k, v := range data {
		for other, owned := range api.managers {
			if other != manager && owned[k] && old[k] != v && !force {
				return nil, &ex10Refusal{409, "Conflict", fmt.Sprintf("Apply failed with 1 conflict: conflict with %q: .data.%s", other, k)}
			}
		}
	}
	result := maps.Clone(old)
	if result == nil {
		result = map[string]string{}
	}
	for k := range api.managers[manager] {
		if _, kept := data[k]; kept {
			continue
		}
		shared := false
		for other, owned := range api.managers {
			shared = shared || (other != manager && owned[k])
		}
		if !shared {
			delete(result, k)
		}
	}
	maps.Copy(result, data)
	owned := map[string]bool{}
	for k := range data {
		owned[k] = true
	}
	api.applied = func() { api.managers[manager] = owned } // once the write succeeds
	d := map[string]any{}
	for k, v := range result {
		d[k] = v
	}
	next["data"] = d
	return next, nil
}

// checkGreeting refuses what kube-apiserver refuses in a write of a Greeting.
func (api *ex10API) checkGreeting(req ex10Request, cur, next map[string]any) *ex10Refusal {
	if cur == nil || req.method == "DELETE" || req.method == "POST" {
		return nil
	}
	if rv, _, _ := unstructured.NestedString(next, "metadata", "resourceVersion"); rv != "" && rv != fakeapi.Meta(cur, "resourceVersion") {
		return &ex10Refusal{409, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on greetings.demo.example.com %q: the object has been modified; please apply your changes to the latest version and try again", req.name)}
	}
	if (&unstructured.Unstructured{Object: cur}).GetDeletionTimestamp() != nil {
		added := slices.DeleteFunc(ex10Finalizers(next), func(f string) bool { return slices.Contains(ex10Finalizers(cur), f) })
		if len(added) > 0 {
			return &ex10Refusal{422, "Invalid", fmt.Sprintf("Greeting.demo.example.com %q is invalid: metadata.finalizers: Forbidden: "+
				"no new finalizers can be added if the object is being deleted, found new finalizers %#v", req.name, added)}
		}
	}
	return nil
}

// refusedFinalizer describes the last of demo-controller's writes of the
// Greeting's finalizers that the API server refused, if no write of them
// succeeded since; or returns "".
func (api *ex10API) refusedFinalizer(namespace, name string) string {
	for _, r := range slices.Backward(api.requestsLocked()) {
		if r.resource == "greetings" && r.namespace == namespace && r.name == name && r.write() {
			if r.code < 400 {
				return ""
			}
			return fmt.Sprintf("%s %s: %d %s", r.method, ex10Cut(r.body, 80), r.code, r.message)
		}
	}
	return ""
}

// judgeRefusal notes the task's rule that a refused request broke.
func (api *ex10API) judgeRefusal(req ex10Request, cur map[string]any, refusal *ex10Refusal) {
	switch {
	case api.broken != "":
	case req.resource == "greetings" && strings.Contains(refusal.message, "no new finalizers"):
		api.broken = fmt.Sprintf("demo-controller tried to add a finalizer to %s/%s, which is being deleted (deletionTimestamp set), "+
			"and the API server refused, in its words: %s. A Greeting being deleted without your finalizer is one you "+
			"never finalized, or have cleaned up already: leave it alone. Decide first from the deletionTimestamp; add "+
			"the finalizer only to a Greeting that is not being deleted", req.namespace, req.name, refusal.message)
	case req.resource == "greetings" && refusal.code == 415 && strings.HasPrefix(req.contentType, "application/strategic-merge-patch+json"):
		api.broken = fmt.Sprintf("demo-controller wrote the finalizers of %s/%s with a strategic merge patch (%s), and the API "+
			"server refused it, in its words: 415 %s. A custom resource takes no strategic merge patch: that needs the patch "+
			"strategy of a Go type compiled into the API server, and a Greeting has none. Write the finalizers as the task "+
			"says (item 4): a JSON merge patch that carries the resourceVersion you read, a JSON patch whose first op tests "+
			"the list, or an update", req.namespace, req.name, ex10Cut(req.body, 100), refusal.message)
	case req.resource == "greetings" && refusal.code == 422 && strings.HasPrefix(req.contentType, "application/json-patch+json") &&
		len(ex10Finalizers(cur)) == 0 && strings.Contains(ex10PatchError(req.body, cur), "missing path: \"/metadata/finalizers/"):
		api.broken = fmt.Sprintf("demo-controller's JSON patch %s of %s/%s, which has no finalizers, was refused (422: %s): "+
			"an add's path must be there up to its last step, and a Greeting with no finalizers has no "+
			"/metadata/finalizers, so /metadata/finalizers/- is nowhere. Test the list you read first (value null if "+
			"it had none), then add the whole list: [{\"op\":\"test\",\"path\":\"/metadata/finalizers\",\"value\":null},"+
			"{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"%s\"]}]", ex10Cut(req.body, 120),
			req.namespace, req.name, refusal.message, ex10Finalizer)
	case req.resource == "configmaps" && api.recordOfDeletedName(req, nil) != "":
		k, v, g := api.recordOfDeleted(req, nil)
		api.broken = fmt.Sprintf("demo-controller wrote the record %s (%q) of the Greeting %s, which was being deleted "+
			"(deletionTimestamp set) before demo-controller started, and the API server answered %d (%s). Decide from the "+
			"deletionTimestamp first: a Greeting being deleted with your finalizer gets its record removed (a removal that "+
			"finds no ConfigMap has succeeded), then the finalizer; its record is never written", k, v, g, refusal.code, refusal.message)
	case req.resource == "configmaps" && refusal.code == 422 && strings.Contains(req.body, `"remove"`):
		api.broken = fmt.Sprintf("demo-controller's JSON patch %s was refused (422: %s): a JSON patch's remove fails when the "+
			"key is not there. Cleanup must succeed when the record is already gone (removed by a run killed before it "+
			"could remove its finalizer): with a JSON merge patch, {\"data\":{\"<key>\":null}} removes the key, or does "+
			"nothing, and succeeds either way", ex10Cut(req.body, 120), refusal.message)
	}
}

// ex10PatchError returns why the JSON patch body does not apply to obj, in
// the words of the JSON patch library the API server uses; or "".
func ex10PatchError(body string, obj map[string]any) string {
	doc, _ := json.Marshal(obj)
	patch, err := jsonpatch.DecodePatch([]byte(body))
	if err == nil {
		_, err = patch.Apply(doc)
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// judgeWrite checks a write that is about to succeed against the task's rules.
func (api *ex10API) judgeWrite(req ex10Request, cur, next map[string]any) {
	if api.broken != "" {
		return
	}
	switch req.resource {
	case "greetings":
		before, after := ex10Finalizers(cur), ex10Finalizers(next)
		for _, f := range after {
			if !slices.Contains(before, f) && f != ex10Finalizer {
				api.broken = fmt.Sprintf("demo-controller added the finalizer %q to %s/%s; the task's finalizer is %s. A finalizer's "+
					"name is qualified by a domain of its controller's, so that no other controller's can clash with it",
					f, req.namespace, req.name, ex10Finalizer)
				if !strings.Contains(f, "/") {
					api.broken += fmt.Sprintf(" (kube-apiserver warns of one that is not: metadata.finalizers: %q: prefer a "+
						"domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers)", f)
				}
				return
			}
		}
		for _, f := range before {
			if f != ex10Finalizer && !slices.Contains(after, f) {
				why := ""
				if strings.HasPrefix(req.contentType, "application/json-patch+json") && !strings.Contains(req.body, `"test"`) {
					why = " Its JSON patch has no test op, so it applies to the list as it is now, not as you read it: an " +
						"add of /metadata/finalizers (to a Greeting that had none) replaces the whole list, and a remove " +
						"by index removes whatever is at that index now."
				}
				api.broken = fmt.Sprintf("demo-controller's write of %s/%s (%s) dropped the finalizer %s, another controller's, "+
					"added after the copy your controller read.%s%s Write the finalizers with a request that fails when the list "+
					"changed since you read it: a JSON merge patch that carries the resourceVersion you read (409 Conflict "+
					"if it changed: return the error, the key is retried on the newer copy), a JSON patch whose first op "+
					"tests the list you read (value null if it had none), or an update; never a merge patch of the list "+
					"alone, nor a JSON patch with no test",
					req.namespace, req.name, ex10Cut(req.body, 160), f, api.injected[ex10Key{"greetings", req.namespace, req.name}], why)
				return
			}
		}
		if slices.Contains(before, ex10Finalizer) && !slices.Contains(after, ex10Finalizer) {
			if v, ok := fakeapi.Data(api.objLocked(ex10Key{"configmaps", ex10RecordNS, ex10RecordName}))[req.namespace+"."+req.name]; ok {
				api.broken = fmt.Sprintf("demo-controller removed its finalizer from %s/%s while its record %s.%s (%q) was still in "+
					"the ConfigMap: once the finalizer is gone, the API server deletes the Greeting, and nothing removes the "+
					"record any more. %s",
					req.namespace, req.name, req.namespace, req.name, v, api.whyRecordStayed(req.namespace+"."+req.name))
				return
			}
		}
	case "configmaps":
		if req.namespace != ex10RecordNS || req.name != ex10RecordName {
			api.broken = fmt.Sprintf("demo-controller wrote the ConfigMap %s/%s: the records are the keys of %s/%s", req.namespace, req.name, ex10RecordNS, ex10RecordName)
			return
		}
		if cur == nil {
			api.broken = fmt.Sprintf("demo-controller's %s (%s) created the ConfigMap %s/%s, which was missing: the controller never "+
				"creates it (the manifest does). A server-side apply creates what is missing; a JSON merge patch is answered "+
				"404 Not Found. Where the ConfigMap is missing, return the error, with what to do (create it: "+
				"demo-controller.yaml does)", req.method, ex10Cut(req.body, 100), ex10RecordNS, ex10RecordName)
			return
		}
		if k, v, g := api.recordOfDeleted(req, next); g != "" {
			api.broken = fmt.Sprintf("demo-controller wrote the record %s (%q) of the Greeting %s, which was being deleted "+
				"(deletionTimestamp set) before demo-controller started: decide from the deletionTimestamp first. A Greeting "+
				"being deleted with your finalizer gets its record removed, then the finalizer; its record is never written", k, v, g)
			return
		}
		before, after := fakeapi.Data(cur), fakeapi.Data(next)
		for k := range before {
			if _, kept := after[k]; kept {
				continue
			}
			ns, name, _ := strings.Cut(k, ".")
			g := &unstructured.Unstructured{Object: api.objLocked(ex10Key{"greetings", ns, name})}
			if g.Object == nil || g.GetDeletionTimestamp() == nil {
				api.broken = fmt.Sprintf("demo-controller's write of the ConfigMap (%s, %s) removed the key %s, which is not the record of a "+
					"Greeting being deleted. Write one key, and only that one: with a JSON merge patch of that key (an update of the "+
					"whole ConfigMap writes every key it read; server-side apply, as one field manager, removes the keys that manager "+
					"applied before and leaves out now)", req.method, ex10Cut(req.body, 100), k)
				return
			}
		}
		for k, v := range after {
			if before[k] == v {
				continue
			}
			ns, name, ok := strings.Cut(k, ".")
			g := api.objLocked(ex10Key{"greetings", ns, name})
			switch {
			case !ok || g == nil:
				api.broken = fmt.Sprintf("demo-controller wrote the key %q (%q) in the ConfigMap: a record's key is <namespace>.<name> "+
					"of its Greeting (default.hello and shop.hello are two Greetings called hello)", k, v)
			case !slices.Contains(ex10Finalizers(g), ex10Finalizer) && api.refusedFinalizer(ns, name) != "":
				api.broken = fmt.Sprintf("demo-controller wrote the record %s (%q) while the Greeting %s/%s did not have its finalizer: "+
					"the API server refused its finalizer write (%s), and then it wrote the record as though the finalizer "+
					"were there. Either it went on after the error (return it: the key is retried), or it added the finalizer "+
					"to the cached Greeting itself, and the cache now shows a finalizer the API server never accepted. "+
					"Objects from the cache are shared and read-only: change a copy (greeting.DeepCopy()), and write the "+
					"record only once the API server has accepted the finalizer", k, v, ns, name, api.refusedFinalizer(ns, name))
			case !slices.Contains(ex10Finalizers(g), ex10Finalizer):
				api.broken = fmt.Sprintf("demo-controller wrote the record %s (%q) while the Greeting %s/%s did not have its finalizer: "+
					"deleted now, it would go at once, and its record would stay for ever. Add the finalizer first, and write the "+
					"record only once the API server has accepted it", k, v, ns, name)
			case !api.texts[ex10Key{"greetings", ns, name}][v]:
				to, _, _ := unstructured.NestedString(g, "spec", "to")
				language, _, _ := unstructured.NestedString(g, "spec", "language")
				spec := fmt.Sprintf("to %q, language %q", to, language)
				if language == "" {
					spec = fmt.Sprintf("to %q, no language", to)
				}
				api.broken = fmt.Sprintf("demo-controller wrote the record %s as %q; the Greeting %s/%s (%s) says %q. "+
					"A record's text is <Hello>, <to> in the Greeting's language: Hello, Bonjour, Hallo or Hola, a comma, a space, "+
					"then whom it greets (the task, item 1)", k, v, ns, name, spec, ex10Text(g))
			}
			if api.broken != "" {
				return
			}
		}
	}
}

// whyRecordStayed says, from demo-controller's last write of the records
// (with one worker, the one just before its finalizer's removal), why the
// record is still there.
func (api *ex10API) whyRecordStayed(record string) string {
	for _, last := range slices.Backward(api.requestsLocked()) {
		if last.resource != "configmaps" || !last.write() {
			continue
		}
		if strings.HasPrefix(last.contentType, "application/apply-patch+yaml") && last.code < 400 {
			var owners []string
			for manager, owned := range api.managers {
				if owned[record] {
					owners = append(owners, manager)
				}
			}
			return fmt.Sprintf("Its last write of the records was a server-side apply (%s) that left the key out, and an apply "+
				"removes only the fields that its field manager owns: %s was written by another field manager (%s; here, "+
				"as a record written by an older version of the controller, or edited by hand, would be). Remove the key "+
				"whoever wrote it: a JSON merge patch {\"data\":{\"%s\":null}} does", ex10Cut(last.body, 80), record,
				strings.Join(slices.Sorted(slices.Values(owners)), ", "), record)
		}
		if last.code < 400 {
			break
		}
		return fmt.Sprintf("Its last write of the records was refused (%s %s: %d %s), and it removed the finalizer anyway. "+
			"Return that error from the sync: the key is retried, and the finalizer goes only once the record is gone",
			last.method, ex10Cut(last.body, 80), last.code, last.message)
	}
	return "Remove the record first, then the finalizer"
}

// recordOfDeleted returns the record key, and text, that a write of the
// records sets (next: the ConfigMap it leaves; nil: read the request's
// body) for a Greeting whose deletion began before demo-controller
// started, and that Greeting's namespace/name; or "", "", "".
func (api *ex10API) recordOfDeleted(req ex10Request, next map[string]any) (key, text, greeting string) {
	set := map[string]string{}
	if next != nil {
		before := fakeapi.Data(api.objLocked(ex10Key{"configmaps", ex10RecordNS, ex10RecordName}))
		for k, v := range fakeapi.Data(next) {
			if old, ok := before[k]; !ok || old != v {
				set[k] = v
			}
		}
	} else {
		var body any
		_ = json.Unmarshal([]byte(req.body), &body)
		switch b := body.(type) {
		case map[string]any: // a merge patch, an apply, an update
			data, _ := b["data"].(map[string]any)
			for k, v := range data {
				if text, ok := v.(string); ok {
					set[k] = text
				}
			}
		case []any: // a JSON patch
			for _, op := range b {
				o, _ := op.(map[string]any)
				path, _ := o["path"].(string)
				text, ok := o["value"].(string)
				if k, isData := strings.CutPrefix(path, "/data/"); isData && ok && (o["op"] == "add" || o["op"] == "replace") {
					set[strings.NewReplacer("~1", "/", "~0", "~").Replace(k)] = text
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		ns, name, _ := strings.Cut(k, ".")
		gk := ex10Key{"greetings", ns, name}
		g := &unstructured.Unstructured{Object: api.objLocked(gk)}
		if _, during := api.deleted[gk]; g.Object != nil && g.GetDeletionTimestamp() != nil && !during {
			return k, set[k], ns + "/" + name
		}
	}
	return "", "", ""
}

func (api *ex10API) recordOfDeletedName(req ex10Request, next map[string]any) string {
	_, _, g := api.recordOfDeleted(req, next)
	return g
}

// ex10Decode reads a whole object as a client sends it: JSON, or, from
// client-go's typed clients, protobuf.
func ex10Finalizers(obj map[string]any) []string {
	if obj == nil {
		return nil
	}
	return (&unstructured.Unstructured{Object: obj}).GetFinalizers()
}

// storeLocked stores next in place of cur (nil: a create), as the API
// server does (fakeapi's UpdateLocked: what a client may not change stays,
// a change gets a new resourceVersion and an event, and a Greeting being
// deleted whose last finalizer is gone is deleted), and notes what a
// Greeting stored says.
func (api *ex10API) storeLocked(key ex10Key, cur, next map[string]any) {
	next = fakeapi.Copy(next)
	fakeapi.SetMeta(next, "namespace", key.namespace)
	fakeapi.SetMeta(next, "name", key.name)
	if cur == nil {
		u := &unstructured.Unstructured{Object: next}
		u.SetUID(types.UID("uid-created-" + key.name))
		if len(u.GetFinalizers()) == 0 {
			u.SetFinalizers(nil)
		}
		api.StoreLocked(key.resource, next)
	} else if next = api.UpdateLocked(key.resource, next); next == nil {
		return
	}
	api.noteText(key, next)
}

// noteText notes what a Greeting says, by the task's rule (item 1).
func (api *ex10API) noteText(key ex10Key, obj map[string]any) {
	if key.resource != "greetings" {
		return
	}
	if api.texts[key] == nil {
		api.texts[key] = map[string]bool{}
	}
	api.texts[key][ex10Text(obj)] = true
}

// ex10Text returns what a Greeting says, by the task's rule (item 1).
func ex10Text(obj map[string]any) string {
	to, _, _ := unstructured.NestedString(obj, "spec", "to")
	language, _, _ := unstructured.NestedString(obj, "spec", "language")
	return map[string]string{"": "Hello", "en": "Hello", "fr": "Bonjour", "de": "Hallo", "es": "Hola"}[language] + ", " + to
}

// create adds a Greeting, as kubectl create does.
func (api *ex10API) create(t *testing.T, g *unstructured.Unstructured) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	key := ex10KeyOf(g.Object)
	api.created[key]++ // made again under the same name: a new UID, as a real API server gives
	uid := "uid-" + g.GetNamespace() + "-" + g.GetName()
	if api.created[key] > 1 {
		uid += "-" + strconv.Itoa(api.created[key])
	}
	obj := fakeapi.Copy(g.Object)
	if len(ex10Finalizers(obj)) == 0 {
		(&unstructured.Unstructured{Object: obj}).SetFinalizers(nil)
	}
	fakeapi.SetMeta(obj, "uid", uid)
	api.StoreLocked(key.resource, obj)
	api.noteText(key, obj)
}

// change changes a Greeting, as another client would.
func (api *ex10API) change(t *testing.T, namespace, name string, f func(*unstructured.Unstructured)) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	key := ex10Key{"greetings", namespace, name}
	cur := api.objLocked(key)
	if cur == nil {
		t.Fatalf("the Greeting %s/%s is gone", namespace, name)
	}
	next := &unstructured.Unstructured{Object: fakeapi.Copy(cur)}
	f(next)
	api.storeLocked(key, cur, next.Object)
}

// remove deletes a Greeting, as kubectl delete does: one with finalizers
// only gets a deletionTimestamp (and a new generation).
func (api *ex10API) remove(t *testing.T, namespace, name string) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	key := ex10Key{"greetings", namespace, name}
	if api.objLocked(key) == nil {
		t.Fatalf("the Greeting %s/%s is gone", namespace, name)
	}
	if len(ex10Finalizers(api.objLocked(key))) > 0 {
		api.deleted[key] = api.seqLocked()
	}
	api.DeleteLocked("greetings", namespace, name, time.Now())
}

// from a Greeting.
func (api *ex10API) removal(namespace, name string) (ex10Request, bool) {
	rs := api.requests(func(r ex10Request) bool {
		return r.resource == "greetings" && r.namespace == namespace && r.name == name && r.write() && r.code < 400 &&
			slices.Contains(r.finalizersBefore, ex10Finalizer) && !slices.Contains(r.finalizersAt, ex10Finalizer)
	})
	if len(rs) == 0 {
		return ex10Request{}, false
	}
	return rs[len(rs)-1], true
}

// removedAt returns how many lines demo-controller had logged when the
// removal of its finalizer from the Greeting was answered.
func (api *ex10API) removedAt(key ex10Key) int {
	api.Lock()
	defer api.Unlock()
	return api.removed[key]
}

// injectOnce makes the change f to the Greeting just before the next
// request of demo-controller's that would change its finalizers is applied.
func (api *ex10API) injectOnce(namespace, name, what string, f func(*unstructured.Unstructured)) {
	api.Lock()
	defer api.Unlock()
	key := ex10Key{"greetings", namespace, name}
	api.injected[key] = " Here, " + what + "."
	api.inject[key] = func(obj map[string]any) { f(&unstructured.Unstructured{Object: obj}) }
}

// barrier creates a Greeting in a namespace of its own and waits for its
// record: with one worker and a queue that hands out keys in order, every
// change made before it has been handled (its first sync, at least).
func (api *ex10API) barrier(t *testing.T, run *ex10Run) {
	t.Helper()
	api.Lock()
	api.barriers++
	name := fmt.Sprintf("barrier-%d", api.barriers)
	api.Unlock()
	api.create(t, ex10Greeting("zz", name, "Ada", "", nil))
	api.waitFor(t, run, "a Greeting created gets its finalizer and its record", func() bool { return api.hasRecord("zz." + name) })
}

func (api *ex10API) greeting(namespace, name string) *unstructured.Unstructured {
	api.Lock()
	defer api.Unlock()
	obj := api.objLocked(ex10Key{"greetings", namespace, name})
	if obj == nil {
		return nil
	}
	return &unstructured.Unstructured{Object: fakeapi.Copy(obj)}
}

func (api *ex10API) finalizers(namespace, name string) []string {
	if g := api.greeting(namespace, name); g != nil {
		return g.GetFinalizers()
	}
	return nil
}

func (api *ex10API) hasFinalizer(namespace, name string) bool {
	return slices.Contains(api.finalizers(namespace, name), ex10Finalizer)
}

func (api *ex10API) record(key string) string {
	api.Lock()
	defer api.Unlock()
	return fakeapi.Data(api.objLocked(ex10Key{"configmaps", ex10RecordNS, ex10RecordName}))[key]
}

func (api *ex10API) hasRecord(key string) bool {
	api.Lock()
	defer api.Unlock()
	_, ok := fakeapi.Data(api.objLocked(ex10Key{"configmaps", ex10RecordNS, ex10RecordName}))[key]
	return ok
}

func (api *ex10API) recordIs(key, text string) bool {
	return api.record(key) == text && api.hasRecord(key)
}

// requests returns the requests so far that match.
func (api *ex10API) requests(match func(ex10Request) bool) []ex10Request {
	api.Lock()
	defer api.Unlock()
	return slices.DeleteFunc(api.requestsLocked(), func(r ex10Request) bool { return !match(r) })
}

func (api *ex10API) requestLines(match func(ex10Request) bool) string {
	rs := api.requests(match)
	return ex10Lines(rs[max(0, len(rs)-12):])
}

// recordWrites counts the writes of the record key: a patch that names
// it, an update or create that changes it.
func (api *ex10API) recordWrites(key string) int {
	return len(api.requests(func(r ex10Request) bool {
		if r.resource != "configmaps" || !r.write() {
			return false
		}
		if r.method == "PATCH" {
			return strings.Contains(r.body, key)
		}
		before, had := r.dataBefore[key]
		after, has := r.dataAfter[key]
		return had != has || before != after
	}))
}

// waitUntil polls cond until it holds, failing at once on a rule broken
// or run's end, and with explain's words after ex10Wait.
func (api *ex10API) waitUntil(t *testing.T, run *ex10Run, cond func() bool, explain func() string) {
	t.Helper()
	for deadline := time.Now().Add(ex10Wait); ; time.Sleep(5 * time.Millisecond) {
		api.Lock()
		broken := api.broken
		api.Unlock()
		if broken != "" {
			t.Fatal(broken)
		}
		if cond() {
			return
		}
		select {
		case <-run.Ended:
			t.Fatalf("run returned %v before the test was done: it runs until its context ends", run.Err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal(explain())
		}
	}
}

// waitFor waits until cond holds; what is the task's rule, for the message.
func (api *ex10API) waitFor(t *testing.T, run *ex10Run, what string, cond func() bool) {
	t.Helper()
	api.waitUntil(t, run, cond, func() string {
		writes := api.requestLines(func(r ex10Request) bool { return r.write() })
		if len(api.requests(func(r ex10Request) bool { return r.write() })) == 0 {
			writes = "  (none: demo-controller wrote nothing at all)"
		}
		return fmt.Sprintf("within %v, not so: %s.\n%s\nThe last requests of demo-controller's that wrote:\n%s",
			ex10Wait, what, api.state(), writes)
	})
}

// waitForGone waits until a Greeting being deleted is gone, and says why not.
func (api *ex10API) waitForGone(t *testing.T, run *ex10Run, namespace, name string) {
	t.Helper()
	key := namespace + "." + name
	api.waitUntil(t, run, func() bool { return api.greeting(namespace, name) == nil }, func() string {
		api.Lock()
		since := api.deleted[ex10Key{"greetings", namespace, name}]
		configMap := api.objLocked(ex10Key{"configmaps", ex10RecordNS, ex10RecordName}) != nil
		api.Unlock()
		mine := func(r ex10Request) bool { // since its deletion began
			return r.seq > since && r.write() && (r.resource == "greetings" && r.namespace == namespace && r.name == name ||
				r.resource == "configmaps" && strings.Contains(r.body, key))
		}
		requests := api.requestLines(mine)
		g := api.greeting(namespace, name)
		var why string
		switch {
		case !slices.Contains(g.GetFinalizers(), ex10Finalizer):
			why = "its finalizer is gone, but another finalizer holds it: this test should not get here"
		case len(api.requests(mine)) == 0:
			why = fmt.Sprintf("it is being deleted (deletionTimestamp set), and still has your finalizer; demo-controller "+
				"wrote nothing for it since. While a finalizer is on it, the API server keeps the Greeting, and the informer hands over "+
				"an update (deletionTimestamp set), not a delete: no delete event comes, and none came for a Greeting deleted while "+
				"the controller was down. Decide from the Greeting as the cache has it: a deletionTimestamp and your finalizer "+
				"mean remove the record %s, then the finalizer (the task's finalizer, %s: code that looks for another name "+
				"finds none here)", key, ex10Finalizer)
		case api.hasRecord(key):
			why = "it is being deleted (deletionTimestamp set), and its record " + key + " is still there"
		case !configMap:
			why = "there is no ConfigMap demo-controller/greetings, so no record to remove, but your finalizer is still on it. " +
				"A patch of a ConfigMap that is not there is answered 404 Not Found: for a removal, that is success " +
				"(apierrors.IsNotFound): the record is gone. Then remove the finalizer"
		default:
			why = "its record is gone, but your finalizer is still on it: remove the finalizer once the record is gone " +
				"(also when the record was gone already: cleanup that finds nothing to remove has succeeded)"
		}
		return fmt.Sprintf("within %v, the Greeting %s/%s was not deleted: %s.\n%s\ndemo-controller's writes for it:\n%s",
			ex10Wait, namespace, name, why, api.state(), requests)
	})
}

// state describes the Greetings and the records, for a message.

// state describes the Greetings and the records, for a message.
func (api *ex10API) state() string {
	api.Lock()
	defer api.Unlock()
	var lines []string
	for k, obj := range api.ObjectsLocked("greetings") {
		g := &unstructured.Unstructured{Object: obj}
		deleting := ""
		if g.GetDeletionTimestamp() != nil {
			deleting = ", being deleted"
		}
		lines = append(lines, fmt.Sprintf("  Greeting %s: finalizers %q%s", k, g.GetFinalizers(), deleting))
	}
	slices.Sort(lines)
	records := api.objLocked(ex10Key{"configmaps", ex10RecordNS, ex10RecordName})
	if records == nil {
		return strings.Join(lines, "\n") + "\n  (no ConfigMap demo-controller/greetings)"
	}
	data, _ := json.Marshal(fakeapi.Data(records))
	return strings.Join(lines, "\n") + "\n  the records: " + string(data)
}

// ex10Times says n times in words: "once", "twice", "3 times".
func ex10Times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
