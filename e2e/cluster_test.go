//go:build e2e

// Package e2e runs the demo-controller binary against a real kube-apiserver
// and etcd on loopback. Run it with `make e2e`, which builds the binary and
// the servers first (hack/build-servers.sh).
//
// There is no kubelet and no scheduler: the tests play their parts through
// the API (binding pods to a node, writing pod status). A test that needs
// the garbage collector starts kube-controller-manager with it
// (startGarbageCollector, in collector_test.go).
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// suiteTimeout bounds the whole suite; past it, TestMain stops the servers,
// prints their last lines, removes its files and fails. It is shorter than
// the -timeout that `make e2e` gives go test, whose panic would skip cleanup.
const suiteTimeout = 10 * time.Minute

const adminToken = "e2e-admin-token"

// controllerManagerToken is kube-controller-manager's own identity,
// system:kube-controller-manager: it lists and watches, and runs each
// controller with the token of that controller's ServiceAccount
// (--use-service-account-credentials), as a cluster does.
const controllerManagerToken = "e2e-kube-controller-manager-token"

var (
	repoRoot   string // the repository, which holds the binary and the manifest
	serversDir string // etcd, kube-apiserver and kubectl
	workDir    string // everything the suite writes; removed at the end

	etcd      *process
	apiServer *process // the API server the tests talk to
	apiPort   int
	adminKube string // kubeconfig path of the admin identity
	admin     kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repoRoot, serversDir = root, filepath.Join(root, ".cache", "servers")
	if workDir, err = os.MkdirTemp("", "demo-controller-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cleanup := func() {
		stopAll()
		os.RemoveAll(workDir)
	}
	defer cleanup()
	timer := time.AfterFunc(suiteTimeout, func() {
		fmt.Fprintf(os.Stderr, "e2e: the suite did not finish within %v\n", suiteTimeout)
		printServerLogs()
		cleanup()
		os.Exit(1)
	})
	defer timer.Stop()

	if err := startCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the cluster:", err)
		printServerLogs()
		return 1
	}
	code = m.Run()
	if code != 0 {
		printServerLogs()
	}
	return code
}

// startCluster starts etcd and one kube-apiserver, and writes the admin
// kubeconfig.
func startCluster() error {
	for _, name := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(serversDir, name)); err != nil {
			return fmt.Errorf("%v: run hack/build-servers.sh (make e2e does)", err)
		}
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "demo-controller")); err != nil {
		return fmt.Errorf("%v: run make build (make e2e does)", err)
	}
	if err := writeCredentials(); err != nil {
		return err
	}
	clientPort, peerPort := freePort(), freePort()
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcd = startProcess("etcd", filepath.Join(serversDir, "etcd"),
		"--name=e2e", "--data-dir="+filepath.Join(workDir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--unsafe-no-fsync", "--log-level=warn")

	apiPort = freePort()
	var err error
	if apiServer, err = startAPIServer(apiPort, etcdURL); err != nil {
		return err
	}
	adminKube = writeKubeconfig("admin", apiPort, adminToken)
	config, err := clientcmd.BuildConfigFromFlags("", adminKube)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = 200, 400 // client-go's default of 5 a second would make setup slow
	admin, err = kubernetes.NewForConfig(config)
	return err
}

// writeCredentials writes the service-account signing key and the token
// file that defines the admin identity.
func writeCredentials() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	tokens := adminToken + ",admin,admin-uid,system:masters\n" +
		controllerManagerToken + ",system:kube-controller-manager,kube-controller-manager-uid\n"
	for name, data := range map[string][]byte{"sa.key": keyPEM, "sa.pub": pubPEM, "tokens.csv": []byte(tokens), "audit-policy.yaml": []byte(auditPolicy)} {
		if err := os.WriteFile(filepath.Join(workDir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// apiServers counts the API servers started, to name their logs.
var apiServers int

// startAPIServer starts a kube-apiserver on port over etcd and waits until it
// is ready. Every API server of the suite shares the certificate directory,
// so a restarted one presents the same serving certificate.
func startAPIServer(port int, etcdURL string) (*process, error) {
	apiServers++
	p := startProcess(fmt.Sprintf("kube-apiserver-%d", apiServers), filepath.Join(serversDir, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir="+filepath.Join(workDir, "certs"),
		"--token-auth-file="+filepath.Join(workDir, "tokens.csv"),
		"--authorization-mode=RBAC",
		// OwnerReferencesPermissionEnforcement: setting blockOwnerDeletion
		// needs update on the owner's finalizers. It is off by default in
		// kube-apiserver (and on kind and kubeadm clusters): on here, so
		// that the tests hold on the clusters that turn it on.
		"--enable-admission-plugins=PodSecurity,ServiceAccount,OwnerReferencesPermissionEnforcement",
		"--audit-policy-file="+filepath.Join(workDir, "audit-policy.yaml"),
		"--audit-log-path="+auditLogPath(apiServers),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(workDir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(workDir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	)
	// Only a readiness probe skips verification: the certificate it would
	// check is written by the server as it starts.
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited: %v", p.name, p.err)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := probe.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return p, fmt.Errorf("%s is not ready: %w", p.name, err)
	}
	return p, nil
}

// writeKubeconfig writes a kubeconfig for the API server on port with a
// bearer token, and returns its path. The server's certificate is
// self-signed; the kubeconfig trusts it as its own CA.
func writeKubeconfig(name string, port int, token string) string {
	path := filepath.Join(workDir, name+".kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:%d", certificate-authority: %q}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: e2e, context: {cluster: e2e, user: %s}}]
current-context: e2e
`, port, filepath.Join(workDir, "certs", "apiserver.crt"), name, token, name)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		panic(err)
	}
	return path
}

// freePort returns a loopback TCP port that nothing listens on right now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is a command the suite started, with its output kept in memory.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

var (
	processesMu sync.Mutex
	processes   []*process
)

// startProcess starts a command whose stdout and stderr go to its buffer. It
// dies with the test binary (Pdeathsig), so nothing is left running even if
// the suite is killed.
func startProcess(name, path string, args ...string) *process {
	p := &process{name: name, cmd: exec.Command(path, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.err = err
		close(p.done)
		return p
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	processesMu.Lock()
	processes = append(processes, p)
	processesMu.Unlock()
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process.
func (p *process) signal(sig os.Signal) {
	if p.cmd.Process != nil && !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// stop sends SIGTERM, and SIGKILL after 15 s, and waits for the exit.
func (p *process) stop() {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitExit waits up to timeout for the process to exit, and returns its
// exit code (-1 if it did not exit in time).
func (p *process) waitExit(timeout time.Duration) int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

// lines returns what the process has written so far, line by line.
func (p *process) lines() []string {
	return strings.Split(strings.TrimRight(p.out.String(), "\n"), "\n")
}

// tail returns the last n lines the process wrote.
func (p *process) tail(n int) string {
	lines := p.lines()
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stopAll stops every process the suite started, newest first.
func stopAll() {
	processesMu.Lock()
	defer processesMu.Unlock()
	for i := len(processes) - 1; i >= 0; i-- {
		processes[i].stop()
	}
}

// printServerLogs prints the last lines of etcd and the API servers.
func printServerLogs() {
	processesMu.Lock()
	defer processesMu.Unlock()
	for _, p := range processes {
		if p.name == "etcd" || strings.HasPrefix(p.name, "kube-apiserver") {
			fmt.Fprintf(os.Stderr, "\n--- last lines of %s ---\n%s\n", p.name, p.tail(30))
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writing process and reading tests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(data []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(data)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// kubectl runs the suite's kubectl with a kubeconfig and returns its output.
func kubectl(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(serversDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
