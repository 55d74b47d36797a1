//go:build e2e

// What the exercises' end-to-end tests (exercises/NN-name/e2e/) share: the
// Greeting CRD, clients, and an admission webhook served by the test. The
// suite builds it without them, so that an exercise's test, copied into
// e2e/, finds it here.

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// greetingCRD is exercise 7's Greeting CRD, which exercises 8 to 14 build on.
const greetingCRD = "exercises/07-crd/greeting-crd.yaml"

// greetingsGVR is the Greeting's resource: the group and version its CRD
// serves, and the plural.
var greetingsGVR = schema.GroupVersionResource{
	Group: "demo.example.com", Version: "v1alpha1", Resource: "greetings"}

// establishGreetingCRD applies the CRD at path (relative to the repository's
// root, or absolute) as the admin, and waits up to 30 s until the CRD
// greetings.demo.example.com is established. Otherwise it fails the test
// with notEstablished.
func establishGreetingCRD(t *testing.T, path, notEstablished string) {
	t.Helper()
	file := path
	if !filepath.IsAbs(file) {
		file = filepath.Join(repoRoot, path)
	}
	if out, err := kubectl(adminKube, "apply", "-f", file); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", path, err, out)
	}
	if out, err := kubectl(adminKube, "wait", "--for=condition=Established", "--timeout=30s",
		"crd/greetings.demo.example.com"); err != nil {
		t.Fatalf("%s: %v\n%s", notEstablished, err, out)
	}
}

// kubeClient returns a clientset with the credentials of kubeconfig.
func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// dynamicClient returns a dynamic client with the credentials of
// kubeconfig. A qps other than 0 replaces client-go's default of 5 requests
// a second, with bursts of twice as many.
func dynamicClient(t *testing.T, kubeconfig string, qps float32) dynamic.Interface {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if qps != 0 {
		config.QPS, config.Burst = qps, int(2*qps)
	}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// adminGreetings returns the admin's client for Greetings.
func adminGreetings(t *testing.T) dynamic.NamespaceableResourceInterface {
	t.Helper()
	return dynamicClient(t, adminKube, 0).Resource(greetingsGVR)
}

// dryRunGreetingChild asks, as client, to create a ConfigMap in ns owned by
// a Greeting with blockOwnerDeletion, as a dry run (checked and admitted,
// never stored). The API server admits it once the admission plugin
// OwnerReferencesPermissionEnforcement knows the Greeting's kind and the
// client may update greetings/finalizers.
func dryRunGreetingChild(ctx context.Context, client kubernetes.Interface, ns string) error {
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mapping-probe", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "demo.example.com/v1alpha1", Kind: "Greeting", Name: "probe",
			UID:        "00000000-0000-0000-0000-000000000000",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
	_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, probe,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// serveWebhook serves handler over TLS on loopback, with a certificate of
// its own for 127.0.0.1, and registers it until the test ends as the
// validating admission webhook name for rule, in namespace ns only. Its
// configuration is named prefix-ns. The webhook fails closed, after 10 s.
// The API server picks the configuration up within a moment: the caller
// probes it until the handler sees a request.
func serveWebhook(t *testing.T, handler http.Handler, prefix, name, ns string,
	rule admissionregistrationv1.RuleWithOperations) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1),
		Subject:   pkix.Name{CommonName: prefix + "-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:        true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, _ := x509.MarshalECPrivateKey(key)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewUnstartedServer(handler)
	server.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	server.StartTLS()
	t.Cleanup(server.Close)

	namespace(t, ns)
	url := server.URL + "/validate"
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         name,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: certPEM},
			Rules:        []admissionregistrationv1.RuleWithOperations{rule},
			NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	webhooks := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := webhooks.Create(context.Background(), config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = webhooks.Delete(context.Background(), config.Name, metav1.DeleteOptions{})
	})
}

// readReview decodes the AdmissionReview that the API server sends a
// webhook. If the body is not one, it answers 400 Bad Request and returns nil.
func readReview(w http.ResponseWriter, r *http.Request) *admissionv1.AdmissionReview {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return nil
	}
	return &review
}

// allowReview answers review: the request is allowed.
func allowReview(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(w).Encode(review)
}
