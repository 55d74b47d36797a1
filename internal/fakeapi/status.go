package fakeapi

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Updated returns what kube-apiserver stores when an update or a patch
// made next out of current: next, with current's identity. The identity is
// metadata's name, namespace, uid, creationTimestamp, resourceVersion and
// generation, which a client cannot change. For a resource with the status
// subresource (statusSubresource true: a CustomResourceDefinition with
// subresources: {status: {}}), a write through /status (subresource
// "status") changes the status only, and a write of the object itself
// changes all but the status; the generation is raised by one when the
// spec changes. Updated changes neither current nor next. The
// resourceVersion stays current's: StoreLocked sets a new one.
func Updated(current, next map[string]any, subresource string, statusSubresource bool) map[string]any {
	next = Copy(next)
	md, _ := next["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		next["metadata"] = md
	}
	old, _ := current["metadata"].(map[string]any)
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
	if !reflect.DeepEqual(next["spec"], current["spec"]) {
		g, _, _ := unstructured.NestedInt64(current, "metadata", "generation")
		_ = unstructured.SetNestedField(next, g+1, "metadata", "generation")
	}
	return next
}
