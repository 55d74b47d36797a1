package fakeapi

import (
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// UpdateLocked stores next in place of the stored object of the same
// namespace and name, as kube-apiserver stores an update or a patch, for
// finalizers and deletion: it returns what it stored (nil: the object was
// deleted), and changes nothing if there is no object stored.
//   - The uid, deletionTimestamp and generation stay as stored: a client
//     cannot change them (this server does not bump the generation when
//     the spec changes).
//   - A write that changes nothing gets no new resourceVersion, and no
//     event.
//   - An empty finalizers list is dropped (after that comparison: a
//     write of an empty list where there was none is a change).
//   - An object being deleted (deletionTimestamp set) whose last finalizer
//     is gone is deleted.
//
// next is copied, not kept.
func (s *Server) UpdateLocked(resource string, next map[string]any) map[string]any {
	cur := s.objects[resource][Meta(next, "namespace")+"/"+Meta(next, "name")]
	if cur == nil {
		return nil
	}
	next = Copy(next)
	u, c := &unstructured.Unstructured{Object: next}, &unstructured.Unstructured{Object: cur}
	u.SetUID(c.GetUID())
	u.SetDeletionTimestamp(c.GetDeletionTimestamp())
	u.SetGeneration(c.GetGeneration())
	u.SetResourceVersion(c.GetResourceVersion())
	if reflect.DeepEqual(cur, next) {
		return cur
	}
	if len(u.GetFinalizers()) == 0 {
		u.SetFinalizers(nil)
	}
	if u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) == 0 {
		s.RemoveLocked(resource, u.GetNamespace(), u.GetName())
		return nil
	}
	s.StoreLocked(resource, next)
	return next
}

// DeleteLocked deletes an object as kube-apiserver does: one without
// finalizers goes at once (RemoveLocked); one with finalizers only gets a
// deletionTimestamp (now), and its generation bumped, at a new
// resourceVersion, and stays until an update removes its last finalizer
// (UpdateLocked). One being deleted already stays as it is. It returns
// the object stored before (nil: there was none).
func (s *Server) DeleteLocked(resource, namespace, name string, now time.Time) map[string]any {
	cur := s.objects[resource][namespace+"/"+name]
	if cur == nil {
		return nil
	}
	u := &unstructured.Unstructured{Object: Copy(cur)}
	if len(u.GetFinalizers()) == 0 {
		return s.RemoveLocked(resource, namespace, name)
	}
	if u.GetDeletionTimestamp() != nil {
		return cur
	}
	stamp := metav1.NewTime(now)
	u.SetDeletionTimestamp(&stamp)
	u.SetGeneration(u.GetGeneration() + 1)
	s.StoreLocked(resource, u.Object)
	return cur
}
