package fakeapi

import "slices"

// Whole returns v, a value json.Unmarshal made, with each whole number an
// int64, as the API server decodes it. unstructured's helpers take an
// integer only as an int64: NestedInt64 finds no float64, and DeepCopyJSON
// panics on an int. An int becomes an int64 too.
func Whole(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = Whole(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = Whole(x)
		}
		return out
	case float64:
		if v == float64(int64(v)) {
			return int64(v)
		}
	case int:
		return int64(v)
	}
	return v
}

// MergePatch applies a JSON merge patch (RFC 7386; a PATCH with
// Content-Type application/merge-patch+json) to target, and returns the
// result. A key of patch set to null removes the key; a map is merged key
// by key; any other value, a list too, replaces what target has. target's
// maps are changed in place.
func MergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return Whole(patch)
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = MergePatch(t[k], v)
		}
	}
	return t
}

// ApplyMerge merges an apply configuration (a PATCH with Content-Type
// application/apply-patch+yaml, as JSON) into target, and returns the
// result, as server-side apply does with the fields the configuration
// sets. A map is merged key by key. A list whose field is named in keys
// (a list with x-kubernetes-list-type: map, such as conditions, keyed on
// type) is merged item by item: an item replaces target's item with the
// same key, or is added. Any other value replaces what target has.
// It is not server-side apply: it keeps no field ownership, so it removes
// no field that a configuration no longer sets, and answers no conflict.
// target's maps are changed in place.
func ApplyMerge(target, applied map[string]any, keys map[string]string) map[string]any {
	var merge func(t, a any) any
	merge = func(t, a any) any {
		am, ok := a.(map[string]any)
		if !ok {
			return Whole(a)
		}
		tm, ok := t.(map[string]any)
		if !ok {
			tm = map[string]any{}
		}
		for k, v := range am {
			if key, ok := keys[k]; ok {
				tm[k] = MergeList(tm[k], v, key)
			} else {
				tm[k] = merge(tm[k], v)
			}
		}
		return tm
	}
	return merge(target, applied).(map[string]any)
}

// MergeList merges the items of list into a copy of target, both lists of
// maps, by the field key: an item replaces the item of target with the
// same key, or is added at the end.
func MergeList(target, list any, key string) []any {
	out, _ := target.([]any)
	out = slices.Clone(out)
	items, _ := list.([]any)
	for _, item := range items {
		m, _ := item.(map[string]any)
		i := slices.IndexFunc(out, func(x any) bool { xm, _ := x.(map[string]any); return xm[key] == m[key] })
		if i >= 0 {
			out[i] = Whole(item)
		} else {
			out = append(out, Whole(item))
		}
	}
	return out
}
