package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// Decode reads a request's body, in JSON or in protobuf (client-go's typed
// clients send built-in types as protobuf).
func Decode(body []byte) (map[string]any, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil && m != nil {
			return m, nil
		}
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

// Copy returns a deep copy of obj (nil for nil).
func Copy(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	return runtime.DeepCopyJSON(obj)
}

// Meta returns a string field of obj's metadata ("" if it has none).
func Meta(obj map[string]any, field string) string {
	v, _, _ := unstructured.NestedString(obj, "metadata", field)
	return v
}

// SetMeta sets a string field of obj's metadata.
func SetMeta(obj map[string]any, field, value string) {
	_ = unstructured.SetNestedField(obj, value, "metadata", field)
}

// Labels returns obj's labels.
func Labels(obj map[string]any) map[string]string {
	v, _, _ := unstructured.NestedStringMap(obj, "metadata", "labels")
	return v
}

// Data returns a ConfigMap's data.
func Data(obj map[string]any) map[string]string {
	v, _, _ := unstructured.NestedStringMap(obj, "data")
	return v
}

// Refs returns obj's owner references.
func Refs(obj map[string]any) []any {
	refs, _, _ := unstructured.NestedSlice(obj, "metadata", "ownerReferences")
	return refs
}

// Controller returns the owner reference of refs that says controller:
// true (nil: none).
func Controller(refs []any) map[string]any {
	for _, ref := range refs {
		if r, _ := ref.(map[string]any); r["controller"] == true {
			return r
		}
	}
	return nil
}

// ControllerUID returns the UID of refs' controller ("" if none).
func ControllerUID(refs []any) string {
	if r := Controller(refs); r != nil {
		return fmt.Sprint(r["uid"])
	}
	return ""
}

// Status returns what the API server answers with err: its code, and the
// Status object.
func Status(err *apierrors.StatusError) (int, any) {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	return int(status.Code), status
}

// WriteStatus sends err, as the API server does.
func WriteStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	code, answer := Status(err)
	Write(w, code, answer)
}

// Write sends an answer in JSON.
func Write(w http.ResponseWriter, code int, answer any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(answer)
}

// OrNone returns s, or "(none)" in place of nothing.
func OrNone(s []string) []string {
	if len(s) == 0 {
		return []string{"(none)"}
	}
	return s
}

// LastLines returns the last n of lines, or "(none)".
func LastLines(lines []string, n int) []string {
	return OrNone(lines[max(0, len(lines)-n):])
}
