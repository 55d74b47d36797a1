package fakeapi

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// Manifest reads the objects of a manifest (demo-controller.yaml), in its
// order: its documents, split at "---" lines, decoded as client-go's scheme
// knows them. It fails the test if it cannot read or decode one.
func Manifest(t testing.TB, manifest string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var objects []runtime.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", manifest, err)
		}
		objects = append(objects, obj)
	}
	return objects
}
