package fakeapi

import (
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// Manifest reads the objects of a manifest (demo-controller.yaml), typed,
// one for each document, in their order. It fails the test on a file it
// cannot read, or a document that is not an object client-go knows.
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
