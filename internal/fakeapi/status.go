package fakeapi

import (
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Updated returns what kube-apiserver stores when an update or a patch
// made next out of current: next, with current's kind, apiVersion and
// identity (metadata's name, namespace, uid, creationTimestamp,
// resourceVersion and generation), which no write changes. With
// statusSubresource false, that is all: for an object with no generation
// and no status, a ConfigMap's say. With statusSubresource true, it is what
// kube-apiserver does for a custom resource whose CRD has subresources:
// {status: {}} (apiextensions-apiserver's customResourceStrategy and
// statusStrategy, PrepareForUpdate). A write through /status (subresource
// "status") changes only the status. A write of the object itself changes
// all but the status, and raises the generation by one if it changes
// anything but metadata. Updated changes neither current nor next. The
// resourceVersion stays current's: StoreLocked sets the next one.
func Updated(current, next map[string]any, subresource string, statusSubresource bool) map[string]any {
	next = Copy(next)
	md, _ := next["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		next["metadata"] = md
	}
	old, _ := current["metadata"].(map[string]any)
	for _, f := range []string{"kind", "apiVersion"} {
		if current[f] != nil {
			next[f] = current[f]
		}
	}
	for _, f := range []string{"uid", "creationTimestamp", "generation", "resourceVersion", "name", "namespace"} {
		if old[f] != nil {
			md[f] = runtime.DeepCopyJSONValue(old[f])
		} else {
			delete(md, f)
		}
	}
	if !statusSubresource {
		return next
	}
	if subresource == "status" {
		status := next["status"]
		next = Copy(current)
		if status != nil {
			next["status"] = status
		} else {
			delete(next, "status")
		}
	} else if current["status"] != nil {
		next["status"] = runtime.DeepCopyJSONValue(current["status"])
	} else {
		delete(next, "status")
	}
	if subresource == "" && !reflect.DeepEqual(withoutMetadata(next), withoutMetadata(current)) {
		g, _, _ := unstructured.NestedInt64(current, "metadata", "generation")
		_ = unstructured.SetNestedField(next, g+1, "metadata", "generation")
	}
	return next
}

// withoutMetadata returns obj's fields but metadata.
func withoutMetadata(obj map[string]any) map[string]any {
	out := maps.Clone(obj)
	delete(out, "metadata")
	return out
}
