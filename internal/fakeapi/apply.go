package fakeapi

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// ParseApply reads a server-side apply (Verb "apply"): its patch, its field
// manager, and whether it forces. An apply without a field manager is
// refused, as kube-apiserver refuses it (422: "is required for apply patch").
func ParseApply(r *Request) (patch map[string]any, manager string, force bool,
	err *apierrors.StatusError) {
	if e := yaml.Unmarshal(r.Body, &patch); e != nil {
		return nil, "", false, apierrors.NewBadRequest(e.Error())
	}
	manager = r.Query.Get("fieldManager")
	if manager == "" {
		required := field.Required(field.NewPath("fieldManager"), "is required for apply patch")
		kind := schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}
		return nil, "", false, apierrors.NewInvalid(kind, "", field.ErrorList{required})
	}
	return patch, manager, r.Query.Get("force") == "true", nil
}

// Fields is the field ownership server-side apply keeps, by object
// ("namespace/name"): the manager of each entry of the string maps it
// tracks ("data.greeting", "metadata.labels.app"). Only those entries are
// tracked, and only they are merged by Apply: a ConfigMap's data, an
// object's labels or annotations.
type Fields map[string]map[string]string

// Set records manager as the owner of field ("data.greeting") of the
// object key.
func (f Fields) Set(key, field, manager string) {
	if f[key] == nil {
		f[key] = map[string]string{}
	}
	f[key][field] = manager
}

// Drop forgets the owner of a field: a field removed has none.
func (f Fields) Drop(key, field string) { delete(f[key], field) }

// Own records manager as the owner of every entry of obj's string maps at
// paths ("data", "metadata.labels"), after forgetting every owner of key's
// fields: as a create does.
func (f Fields) Own(key string, obj map[string]any, manager string, paths ...string) {
	f[key] = map[string]string{}
	for _, p := range paths {
		m, _, _ := unstructured.NestedStringMap(obj, strings.Split(p, ".")...)
		for k := range m {
			f.Set(key, p+"."+k, manager)
		}
	}
}

// Apply merges the entries of patch's string maps at paths into a copy of
// obj (the object key), as server-side apply does: an entry whose value
// changes and that another manager owns is a conflict, unless force; the
// applier then owns every entry it sent. It returns the copy, and whether
// anything changed (kube-apiserver stores nothing for an apply that changes
// nothing: no new resourceVersion, no event). A conflict is a 409 that
// names each field and its owner, and changes nothing.
func (f Fields) Apply(key string, obj, patch map[string]any, manager string, force bool,
	paths ...string) (map[string]any, bool, *apierrors.StatusError) {
	var conflicts []string
	changes := map[string]string{}
	for _, p := range paths {
		path := strings.Split(p, ".")
		sent, _, _ := unstructured.NestedStringMap(patch, path...)
		current, _, _ := unstructured.NestedStringMap(obj, path...)
		for k, v := range sent {
			owner := f[key][p+"."+k]
			if current[k] != v && owner != "" && owner != manager && !force {
				conflicts = append(conflicts, fmt.Sprintf("conflict with %q: .%s.%s", owner, p, k))
			}
			changes[p+"."+k] = v
		}
	}
	if len(conflicts) > 0 {
		slices.Sort(conflicts)
		msg := fmt.Sprintf("Apply failed with %d conflict(s): %s", len(conflicts),
			strings.Join(conflicts, "; "))
		return obj, false, apierrors.NewApplyConflict(nil, msg)
	}
	merged := Copy(obj)
	for _, p := range paths {
		for k, v := range changes {
			if entry, ok := strings.CutPrefix(k, p+"."); ok {
				_ = unstructured.SetNestedField(merged, v, append(strings.Split(p, "."), entry)...)
				f.Set(key, k, manager)
			}
		}
	}
	return merged, !reflect.DeepEqual(obj, merged), nil
}
