//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// startupDeadline is demo-controller's default --startup-timeout, which the
// manifest keeps: by then a forbidden identity must have been reported.
const startupDeadline = 10 * time.Second

// The kubelet mounts the service account's credentials here; client-go's
// rest.InClusterConfig reads its token and ca.crt.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// TestInCluster runs the binary as demo-controller.yaml's Deployment runs it:
// built as the Dockerfile builds it, alone in its root filesystem, started by
// runc with the manifest's arguments, user, security context and memory
// limit, and with what a kubelet adds: the service account's token, the CA
// and the namespace, and KUBERNETES_SERVICE_HOST and _PORT. There is no
// kubeconfig, so client-go must find the API server in-cluster.
func TestInCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a container with runc needs root; run the suite as root, as CI does")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc is not installed: apt-get install runc (.ci/run does)")
	}
	pod := manifestApplied(t)
	img := buildImage(t)
	c := containerFromManifest(t, pod, img)

	t.Run("the manifest's service account", func(t *testing.T) {
		const ns = "incluster"
		createPod(t, ns, "before")
		sa := serviceAccountVolume(t, pod.Namespace, pod.Spec.ServiceAccountName)
		spec := c.spec(img.rootfs, sa)
		makeMountPoints(t, spec)
		before := fileTree(t, img.rootfs, sa)
		p, id := runContainer(t, runc, "manifest", spec)
		// The same identity through a kubeconfig, for comparison.
		k := startController(t, serviceAccountKubeconfig(t, pod.Namespace, pod.Spec.ServiceAccountName))

		at := []int{waitForLines(t, p, 0, fmt.Sprintf(`"Starting demo-controller" server="https://127.0.0.1:%d"`, apiPort)), 0}
		both := func(wants ...string) {
			t.Helper()
			for i, p := range []*process{p, k} {
				at[i] = waitForLines(t, p, at[i], wants...)
			}
		}
		both("Cache synced", `"Pod found" pod="incluster/before"`)
		c.check(t, runc, id)

		createPod(t, ns, "web")
		both(`"Pod created" pod="incluster/web"`)
		bind(t, ns, "web", "node-1")
		both(`"Pod scheduled" pod="incluster/web"`)
		setStatus(t, ns, "web", corev1.PodRunning, true, 0)
		both(`"Pod phase changed" pod="incluster/web"`, `"Pod ready" pod="incluster/web"`)
		deletePod(t, ns, "web", nil)
		both(`"Pod terminating" pod="incluster/web"`)
		deletePod(t, ns, "web", now)
		both(`"Pod deleted" pod="incluster/web"`)
		want := []string{
			`"Pod found" pod="incluster/before"`, `"Pod created" pod="incluster/web"`,
			`"Pod scheduled" pod="incluster/web"`, `"Pod phase changed" pod="incluster/web"`,
			`"Pod ready" pod="incluster/web"`, `"Pod terminating" pod="incluster/web"`,
			`"Pod deleted" pod="incluster/web"`,
		}
		for _, p := range []*process{p, k} {
			if got := podLines(p, ns); !slices.Equal(got, want) {
				t.Errorf("%s reported\n %q\nwant\n %q", p.name, got, want)
			}
		}

		// A deleted pod's containers get SIGTERM, then SIGKILL when the grace
		// period ends. The binary is PID 1, which gets only the signals it handles.
		grace := 30 * time.Second // the API's default
		if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
			grace = time.Duration(*s) * time.Second
		}
		start := time.Now()
		if out, err := exec.Command(runc, "kill", id, "TERM").CombinedOutput(); err != nil {
			t.Fatalf("runc kill %s TERM: %v: %s", id, err, out)
		}
		if code := p.waitExit(grace); code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0 (-1: still running after the %v grace period)", code, grace)
		}
		if took := time.Since(start); took > grace/2 {
			t.Errorf("took %v to stop after SIGTERM, more than half the %v grace period", took.Round(time.Millisecond), grace)
		}
		waitForLines(t, p, at[0], "Worker stopped")
		for _, line := range p.lines() {
			if l := strings.ToLower(line); strings.Contains(l, "forbidden") || strings.Contains(l, "unauthorized") {
				t.Errorf("with the manifest's RBAC it logged: %s", line)
			}
		}
		if changed := diffTrees(before, fileTree(t, img.rootfs, sa)); len(changed) > 0 {
			t.Errorf("the container wrote outside its mounts: %s", strings.Join(changed, ", "))
		}
	})

	t.Run("a role without watch is refused clearly", func(t *testing.T) {
		ns, name := namespace(t, "incluster"), "no-watch"
		roleWithout(t, "watch", ns, name)
		p, _ := runContainer(t, runc, name, c.spec(img.rootfs, serviceAccountVolume(t, ns, name)))

		// It may exit at once or log the 403 and retry; either way the 403 comes
		// with the first requests, never after a silent wait.
		var said string
		_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, startupDeadline, true, func(context.Context) (bool, error) {
			for _, line := range p.lines() {
				if strings.Contains(line, `cannot watch resource "pods"`) {
					said = line
					return true, nil
				}
			}
			return p.exited(), nil
		})
		if said == "" {
			t.Fatalf("within %v it did not say `cannot watch resource \"pods\"` (exited: %v); it wrote:\n%s", startupDeadline, p.exited(), p.out.String())
		}
		if !strings.Contains(said, "demo-controller.yaml") {
			t.Errorf("the 403 line does not point at demo-controller.yaml: %s", said)
		}
		if p.exited() {
			if code := p.cmd.ProcessState.ExitCode(); code != 1 || !strings.HasPrefix(said, "demo-controller: ") {
				t.Errorf("exit code %d (want 1) with the line %q (want it to start with \"demo-controller: \")", code, said)
			}
		}
	})
}

// manifestApplied makes sure demo-controller.yaml's objects are on the server
// and returns its Deployment's pod. TestDeployThenDelete, in e2e_test.go,
// which go test runs first, deletes them; with no namespace controller here,
// their namespace then stays terminating. So this plays that controller's
// last step (finalize the empty namespace, delete it) and creates the
// manifest again: the test proves the manifest's own objects in either order.
func manifestApplied(t *testing.T) *corev1.Pod {
	t.Helper()
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	pod := podFromTemplate(t)
	ctx := context.Background()
	namespaces := admin.CoreV1().Namespaces()
	ns, err := namespaces.Get(ctx, pod.Namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.DeletionTimestamp != nil {
		ns.Spec.Finalizers = nil
		if _, err := namespaces.Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := namespaces.Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		t.Log("demo-controller.yaml's objects were deleted (TestDeployThenDelete runs first): creating them again")
		// Apply, not create: a retry must accept what an earlier try created
		// while admission still saw the old namespace.
		var out string
		gone := false
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, lineTimeout, true, func(context.Context) (bool, error) {
			if !gone {
				_, err := namespaces.Get(ctx, ns.Name, metav1.GetOptions{})
				if gone = apierrors.IsNotFound(err); !gone {
					return false, nil
				}
			}
			var err error
			out, err = kubectl(adminKube, "apply", "-f", filepath.Join(repoRoot, "demo-controller.yaml"))
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("creating demo-controller.yaml again: %v\n%s", err, out)
		}
	}
	waitUntilMay(t, "list", pod.Namespace, pod.Spec.ServiceAccountName)
	return pod
}

// waitUntilMay waits until the service account ns/name may verb pods: the
// API server's RBAC cache sees a new binding shortly after it is created.
func waitUntilMay(t *testing.T, verb, ns, name string) {
	t.Helper()
	as := "--as=system:serviceaccount:" + ns + ":" + name
	var out string
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, lineTimeout, true, func(context.Context) (bool, error) {
		out, _ = kubectl(adminKube, "auth", "can-i", verb, "pods", "--all-namespaces", as)
		return strings.TrimSpace(out) == "yes", nil
	}); err != nil {
		t.Fatalf("kubectl auth can-i %s pods %s: %q", verb, as, out)
	}
}

// roleWithout creates the service account ns/name, bound to a copy of the
// manifest's ClusterRole without verb.
func roleWithout(t *testing.T, verb, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, obj := range manifestObjects(t) {
		if r, ok := obj.(*rbacv1.ClusterRole); ok {
			role = r
		}
	}
	if role == nil {
		t.Fatal("demo-controller.yaml has no ClusterRole")
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: ns + "-" + name}
	for i := range role.Rules {
		role.Rules[i].Verbs = slices.DeleteFunc(role.Rules[i].Verbs, func(v string) bool { return v == verb })
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntilMay(t, "list", ns, name)
}

// serviceAccountVolume writes what the kubelet mounts at serviceAccountDir
// for the service account ns/name: a token from the TokenRequest API, the
// API server's CA (here its self-signed serving certificate) and the
// namespace. It returns the directory.
func serviceAccountVolume(t *testing.T, ns, name string) string {
	t.Helper()
	token, err := kubectl(adminKube, "create", "token", name, "-n", ns)
	if err != nil {
		t.Fatalf("kubectl create token: %v: %s", err, token)
	}
	ca, err := os.ReadFile(filepath.Join(workDir, "certs", "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(workDir, "serviceaccount-"+ns+"-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string]string{"token": strings.TrimSpace(token), "ca.crt": string(ca), "namespace": ns} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// image is what the Dockerfile's final stage holds.
type image struct {
	rootfs     string   // its root filesystem
	entrypoint []string // ENTRYPOINT, exec form
	user       string   // USER, "uid:gid"
	workdir    string   // WORKDIR
}

// buildImage builds the image's root filesystem as the Dockerfile does, with
// no Docker engine: each stage is a directory standing for its root
// filesystem, and COPY, ARG, WORKDIR and RUN act on it, so the binary comes
// from the very command the image is built with. The build stage's base is
// the host (its Go and make); a distroless static base adds its users, /tmp
// and the nonroot user's home (distrolessStatic). An instruction this does
// not know fails the test.
func buildImage(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	type stage struct {
		root, workdir string
		args          []string // ARG defaults, for RUN
	}
	stages := map[string]*stage{}
	var s *stage
	var img image
	for i, line := range dockerfileInstructions(string(data)) {
		instruction, rest, _ := strings.Cut(line, " ")
		if s == nil && instruction != "FROM" {
			t.Fatalf("Dockerfile: %s before FROM", instruction)
		}
		switch instruction {
		case "FROM": // FROM base [AS name]
			s = &stage{root: filepath.Join(workDir, "image", strconv.Itoa(i)), workdir: "/"}
			f := strings.Fields(rest)
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stages[f[2]] = s
			}
			if strings.HasPrefix(f[0], "gcr.io/distroless/static") {
				distrolessStatic(t, s.root)
			}
			img = image{rootfs: s.root, workdir: "/"}
		case "WORKDIR":
			s.workdir = path.Join(s.workdir, rest)
			img.workdir = s.workdir
		case "ARG":
			if strings.Contains(rest, "=") {
				s.args = append(s.args, rest)
			}
		case "COPY":
			copyFiles(t, strings.Fields(rest), s.root, s.workdir, func(name string) string {
				if stages[name] == nil {
					t.Fatalf("Dockerfile: COPY --from=%s: no such stage", name)
				}
				return stages[name].root
			})
		case "RUN":
			if strings.HasPrefix(rest, "[") {
				t.Fatalf("Dockerfile: RUN in exec form is not supported here: %s", line)
			}
			t.Logf("Dockerfile: %s", line)
			cmd := exec.Command("sh", "-c", rest)
			cmd.Dir, cmd.Env = filepath.Join(s.root, s.workdir), append(buildEnv(), s.args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("Dockerfile: %s: %v\n%s", line, err, out)
			}
		case "USER":
			img.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &img.entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT is not in exec form: %s", line)
			}
		default:
			t.Fatalf("Dockerfile: %s is not supported here; teach buildImage", instruction)
		}
	}
	if len(img.entrypoint) == 0 {
		t.Fatal("Dockerfile: the final stage has no ENTRYPOINT")
	}
	checkStatic(t, filepath.Join(img.rootfs, img.entrypoint[0]))
	return img
}

// distrolessStatic lays out in root what of a distroless static image a
// program could use: the users root, nobody and nonroot (65532), whose home
// /home/nonroot is its own, and a /tmp anyone may write to. (It leaves out
// CA certificates, time zones and the package list.)
func distrolessStatic(t *testing.T, root string) {
	t.Helper()
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"etc/group":  "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
	}
	dirs := []struct {
		path     string
		mode     fs.FileMode
		uid, gid int
	}{{"etc", 0o755, 0, 0}, {"root", 0o700, 0, 0}, {"home/nonroot", 0o700, 65532, 65532}, {"tmp", 0o777 | fs.ModeSticky, 0, 0}}
	for _, d := range dirs {
		dir := filepath.Join(root, d.path)
		if err := errors.Join(os.MkdirAll(dir, 0o755), os.Chmod(dir, d.mode), os.Chown(dir, d.uid, d.gid)); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// dockerfileInstructions returns the Dockerfile's instructions, one a line,
// with continuation lines joined and comments left out.
func dockerfileInstructions(data string) []string {
	var out []string
	var cont string
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont += s
			continue
		}
		instruction, rest, _ := strings.Cut(cont+line, " ")
		out = append(out, strings.ToUpper(instruction)+" "+strings.TrimSpace(rest))
		cont = ""
	}
	return out
}

// copyFiles does a COPY [--from=stage] src... dst into the stage at root:
// from the build context, less what .dockerignore leaves out, or from the
// root of another stage.
func copyFiles(t *testing.T, args []string, root, workdir string, stageRoot func(string) string) {
	t.Helper()
	from, fromContext := repoRoot, true
	if name, ok := strings.CutPrefix(args[0], "--from="); ok {
		from, fromContext, args = stageRoot(name), false, args[1:]
	}
	dst := filepath.Join(root, path.Join(workdir, args[len(args)-1]))
	var sources []string
	for _, src := range args[:len(args)-1] {
		matches, err := filepath.Glob(filepath.Join(from, src))
		if err != nil || len(matches) == 0 {
			t.Fatalf("Dockerfile: COPY %s: no such file", src)
		}
		for _, m := range matches {
			if !fromContext || !dockerIgnored(t, filepath.Base(m)) {
				sources = append(sources, m)
			}
		}
	}
	toDir := strings.HasSuffix(args[len(args)-1], "/") || len(sources) > 1
	for _, src := range sources {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(src)
		target := dst
		if toDir {
			target = filepath.Join(dst, filepath.Base(src))
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// dockerIgnored reports whether .dockerignore keeps the top-level file name
// out of the build context: the last pattern that matches decides.
func dockerIgnored(t *testing.T, name string) bool {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		return false
	}
	ignored := false
	for _, pattern := range strings.Split(string(data), "\n") {
		pattern = strings.TrimSpace(pattern)
		if pattern == "" || strings.HasPrefix(pattern, "#") {
			continue
		}
		p, keep := strings.CutPrefix(pattern, "!")
		if ok, err := filepath.Match(p, name); err != nil {
			t.Fatalf(".dockerignore: %q: %v", pattern, err)
		} else if ok {
			ignored = !keep
		}
	}
	return ignored
}

// buildEnv is the environment for the Dockerfile's RUN instructions: this
// one, less what the golang image does not set and that would change the
// build (make e2e's CGO_ENABLED=0 would hide a Makefile that lost its own)
// or confuse a nested make.
func buildEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"CGO_ENABLED", "GOFLAGS", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}, name)
	})
}

// checkStatic fails the test unless the binary is statically linked: the
// distroless static image has no C library to load it with.
func checkStatic(t *testing.T, binary string) {
	t.Helper()
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatalf("the image's entrypoint: %v", err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	interp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	if interp || len(libs) > 0 {
		t.Fatalf("%s is dynamically linked (libraries %q): a static image cannot run it", binary, libs)
	}
}

// The capabilities a container runtime (containerd, CRI-O) grants unless the
// pod drops them.
var runtimeDefaultCaps = []string{
	"CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_MKNOD",
	"CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
}

// podContainer is how a kubelet and its runtime would run the manifest's one
// container from the image.
type podContainer struct {
	args, env            []string
	cwd                  string
	uid, gid             int64
	caps                 []string
	noNewPrivs, readOnly bool
	memoryLimit          int64 // bytes; 0: none
}

// containerFromManifest reads the pod template as a kubelet would: command
// and args over the image's ENTRYPOINT, env, the container's security
// context over the pod's over the image's USER, and the memory limit.
func containerFromManifest(t *testing.T, pod *corev1.Pod, img image) podContainer {
	t.Helper()
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers; this test runs one", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	entrypoint := img.entrypoint
	if len(ctr.Command) > 0 {
		entrypoint = ctr.Command // command replaces ENTRYPOINT; args, the image's CMD (it has none)
	}
	c := podContainer{
		args: append(slices.Clone(entrypoint), ctr.Args...),
		// PATH as the image and every runtime set it, and
		// the API server's address as a kubelet gives it to every container.
		env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"KUBERNETES_SERVICE_HOST=127.0.0.1", fmt.Sprintf("KUBERNETES_SERVICE_PORT=%d", apiPort)},
		cwd:         cmp.Or(ctr.WorkingDir, img.workdir),
		caps:        slices.Clone(runtimeDefaultCaps),
		memoryLimit: ctr.Resources.Limits.Memory().Value(),
	}
	if len(ctr.EnvFrom) > 0 {
		t.Fatal("the container's envFrom is not supported here")
	}
	for _, e := range ctr.Env {
		value := e.Value
		switch ref := e.ValueFrom; {
		case ref == nil:
		case ref.ResourceFieldRef != nil && ref.ResourceFieldRef.Resource == "limits.memory":
			// The downward API, as a kubelet resolves it: the limit in bytes,
			// divided by the divisor if there is one.
			divisor := ref.ResourceFieldRef.Divisor.Value()
			value = strconv.FormatInt(ctr.Resources.Limits.Memory().Value()/max(divisor, 1), 10)
		default:
			t.Fatalf("the container's env %s has a valueFrom this test cannot resolve", e.Name)
		}
		c.env = append(c.env, e.Name+"="+value)
	}
	if _, err := fmt.Sscanf(img.user, "%d:%d", &c.uid, &c.gid); err != nil {
		t.Fatalf("Dockerfile: USER %q is not uid:gid", img.user)
	}
	var runAsNonRoot bool
	for _, sc := range []*corev1.SecurityContext{podSecurity(pod.Spec.SecurityContext), ctr.SecurityContext} {
		if sc == nil {
			continue
		}
		if sc.RunAsUser != nil {
			c.uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			c.gid = *sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			runAsNonRoot = *sc.RunAsNonRoot
		}
		if sc.Capabilities != nil {
			for _, drop := range sc.Capabilities.Drop {
				c.caps = slices.DeleteFunc(c.caps, func(cp string) bool { return drop == "ALL" || cp == "CAP_"+string(drop) })
			}
			for _, add := range sc.Capabilities.Add {
				c.caps = append(c.caps, "CAP_"+string(add))
			}
		}
		if sc.AllowPrivilegeEscalation != nil {
			c.noNewPrivs = !*sc.AllowPrivilegeEscalation
		}
		if sc.ReadOnlyRootFilesystem != nil {
			c.readOnly = *sc.ReadOnlyRootFilesystem
		}
	}
	if runAsNonRoot && c.uid == 0 {
		t.Fatal("runAsNonRoot with user 0: a kubelet would not start the container")
	}
	return c
}

// podSecurity returns the fields of a pod's security context that a
// container's may override.
func podSecurity(sc *corev1.PodSecurityContext) *corev1.SecurityContext {
	if sc == nil {
		return nil
	}
	return &corev1.SecurityContext{RunAsUser: sc.RunAsUser, RunAsGroup: sc.RunAsGroup, RunAsNonRoot: sc.RunAsNonRoot}
}

// spec returns runc's config.json for the container, with serviceAccount
// mounted read-only where the kubelet mounts it. The container has its own
// mount, PID, IPC and UTS namespaces, and the host's network: the API server
// listens on loopback. (The manifest's seccomp profile, RuntimeDefault, is
// not applied: it is the runtime's, not the manifest's.)
func (c podContainer) spec(rootfs, serviceAccount string) map[string]any {
	linux := map[string]any{
		"namespaces": []map[string]string{{"type": "mount"}, {"type": "pid"}, {"type": "ipc"}, {"type": "uts"}},
		"resources":  map[string]any{"devices": []map[string]any{{"allow": false, "access": "rwm"}}},
	}
	if c.memoryLimit > 0 {
		linux["resources"].(map[string]any)["memory"] = map[string]any{"limit": c.memoryLimit}
	}
	return map[string]any{
		"ociVersion": "1.0.2",
		"root":       map[string]any{"path": rootfs, "readonly": c.readOnly},
		"hostname":   "demo-controller",
		"process": map[string]any{
			"user": map[string]any{"uid": c.uid, "gid": c.gid},
			"args": c.args, "env": c.env, "cwd": c.cwd,
			"capabilities":    map[string]any{"bounding": c.caps, "effective": c.caps, "permitted": c.caps},
			"noNewPrivileges": c.noNewPrivs,
		},
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": serviceAccountDir, "type": "bind", "source": serviceAccount, "options": []string{"rbind", "ro"}},
		},
		"linux": linux,
	}
}

// check reads the running container's process from /proc and fails the test
// unless it runs as asked: user and group, no capabilities if all were
// dropped, no_new_privs, a read-only root, and no KUBECONFIG. (HOME is set,
// as every runtime sets it, from /etc/passwd: /home/nonroot, which is empty.)
func (c podContainer) check(t *testing.T, runc, id string) {
	t.Helper()
	out, err := exec.Command(runc, "state", id).Output()
	var state struct{ Pid int }
	if err == nil {
		err = json.Unmarshal(out, &state)
	}
	if err != nil {
		t.Fatalf("runc state %s: %v", id, err)
	}
	read := func(file string) string {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", state.Pid, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	status := map[string]string{}
	for _, line := range strings.Split(read("status"), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	ids := func(id int64) string { return strings.TrimSpace(strings.Repeat(strconv.FormatInt(id, 10)+" ", 4)) } // real, effective, saved, fs
	want := map[string]string{"Uid": ids(c.uid), "Gid": ids(c.gid), "NoNewPrivs": "0"}
	if c.noNewPrivs {
		want["NoNewPrivs"] = "1"
	}
	if len(c.caps) == 0 {
		want["CapEff"], want["CapPrm"], want["CapBnd"] = "0000000000000000", "0000000000000000", "0000000000000000"
	}
	for k, v := range want {
		if got := status[k]; got != v {
			t.Errorf("the container's process has %s: %s, want %s", k, got, v)
		}
	}
	for _, line := range strings.Split(read("mountinfo"), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			if ro := slices.Contains(strings.Split(f[5], ","), "ro"); ro != c.readOnly {
				t.Errorf("the container's root is mounted %s; readOnlyRootFilesystem is %v", f[5], c.readOnly)
			}
		}
	}
	for _, kv := range strings.Split(read("environ"), "\x00") {
		if strings.HasPrefix(kv, "KUBECONFIG=") {
			t.Errorf("the container's environment has %s", kv)
		}
	}
}

// runContainer runs the OCI bundle of spec with `runc run` in the foreground,
// so that the container's output is the process's, and returns the process
// and the container's ID. The container is deleted when the test ends.
func runContainer(t *testing.T, runc, name string, spec map[string]any) (*process, string) {
	t.Helper()
	bundle := filepath.Join(workDir, "bundle-"+name)
	config, err := json.MarshalIndent(spec, "", "  ")
	if err == nil {
		err = os.Mkdir(bundle, 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), config, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("demo-controller-e2e-%d-%s", os.Getpid(), name)
	p := startProcess("demo-controller in runc ("+name+")", runc, "run", "--bundle", bundle, id)
	t.Cleanup(func() {
		if out, err := exec.Command(runc, "delete", "--force", id).CombinedOutput(); err != nil && !strings.Contains(string(out), "does not exist") {
			t.Errorf("runc delete --force %s: %v: %s", id, err, out)
		}
		p.stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", p.name, p.out.String())
		}
	})
	return p, id
}

// makeMountPoints creates the mount points of spec in its root filesystem,
// which runc would otherwise create as the container starts: made before,
// they do not count as the container's writes. (Those under /dev are in the
// container's own tmpfs.)
func makeMountPoints(t *testing.T, spec map[string]any) {
	t.Helper()
	rootfs := spec["root"].(map[string]any)["path"].(string)
	for _, m := range spec["mounts"].([]map[string]any) {
		if dest := m["destination"].(string); !strings.HasPrefix(dest, "/dev/") {
			if err := os.MkdirAll(filepath.Join(rootfs, dest), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// podLines returns the lifecycle lines the process wrote about pods in ns.
func podLines(p *process, ns string) []string {
	return slices.DeleteFunc(lifecycleLines(p, 0), func(line string) bool {
		return !strings.Contains(line, `pod="`+ns+`/`)
	})
}

// fileTree records each file and directory under dirs: its mode, size and
// modification time.
func fileTree(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			tree[path] = fmt.Sprintf("%v %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

// diffTrees returns the paths added, removed or changed from before to after.
func diffTrees(before, after map[string]string) []string {
	var changed []string
	for path, was := range before {
		if is, ok := after[path]; !ok || is != was {
			changed = append(changed, path)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			changed = append(changed, path)
		}
	}
	slices.Sort(changed)
	return changed
}
