package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// logLines runs f with a klog text logger at verbosity v, as the worker sets
// it up (with the pod's key attached), and returns what it wrote, one entry
// per line, without klog's header of severity, time and source.
func logLines(t *testing.T, v int, f func(ctx context.Context)) []string {
	t.Helper()
	var buf bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf), textlogger.Verbosity(v)))
	f(klog.NewContext(context.Background(), klog.LoggerWithValues(logger, "pod", klog.KRef("default", "web"))))
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line != "" {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
	}
	return lines
}

// klogHeader matches the start of a klog text line: severity, date, time,
// thread and source, as in `I1122 08:04:15.337614   12345 handler.go:34] `.
var klogHeader = regexp.MustCompile(`^[IWE]\d{4} [\d:.]+ +\d+ [^ ]+\] `)

// pod builds default/web (with testPod) from its lifecycle fields.
func pod(node string, phase corev1.PodPhase, ready bool, restarts int32, terminating bool) *corev1.Pod {
	p := testPod("default", "web", "uid-web", "5", phase)
	p.Spec.NodeName = node
	p.Status.ContainerStatuses[0].RestartCount = restarts
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	return p
}

func TestLogHandlerLines(t *testing.T) {
	tests := []struct {
		name      string
		verbosity int
		log       func(ctx context.Context) error
		want      []string
	}{
		{
			name: "found at start",
			log: func(ctx context.Context) error {
				return LogHandler{}.Created(ctx, pod("node-1", "Running", true, 0, false), true)
			},
			want: []string{`"Pod found" pod="default/web" phase="Running" node="node-1"`},
		},
		{
			name: "created after the start",
			log: func(ctx context.Context) error {
				return LogHandler{}.Created(ctx, pod("", "Pending", false, 0, false), false)
			},
			want: []string{`"Pod created" pod="default/web" phase="Pending"`},
		},
		{
			name: "scheduled",
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("", "Pending", false, 0, false), pod("node-1", "Pending", false, 0, false))
			},
			want: []string{`"Pod scheduled" pod="default/web" node="node-1"`},
		},
		{
			name: "running and ready",
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("node-1", "Pending", false, 0, false), pod("node-1", "Running", true, 0, false))
			},
			want: []string{
				`"Pod phase changed" pod="default/web" oldPhase="Pending" phase="Running"`,
				`"Pod ready" pod="default/web"`,
			},
		},
		{
			name: "a container restarts and the pod is no longer ready",
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("node-1", "Running", true, 0, false), pod("node-1", "Running", false, 1, false))
			},
			want: []string{
				`"Pod not ready" pod="default/web"`,
				`"Container restarted" pod="default/web" container="app" restartCount=1`,
			},
		},
		{
			name: "terminating",
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("node-1", "Running", true, 1, false), pod("node-1", "Running", true, 1, true))
			},
			want: []string{`"Pod terminating" pod="default/web"`},
		},
		{
			name: "failed",
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("node-1", "Running", true, 1, false), pod("node-1", "Failed", false, 1, false))
			},
			want: []string{
				`"Pod phase changed" pod="default/web" oldPhase="Running" phase="Failed"`,
				`"Pod not ready" pod="default/web"`,
			},
		},
		{
			name: "an update that changes nothing in the lifecycle is silent",
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("node-1", "Running", true, 1, false), pod("node-1", "Running", true, 1, false))
			},
		},
		{
			// Every call shows in the trace, but that is sync's (controller.go),
			// not the handler's.
			name:      "even at -v=5 the handler is silent on such an update",
			verbosity: 5,
			log: func(ctx context.Context) error {
				return LogHandler{}.Updated(ctx, pod("node-1", "Running", true, 1, false), pod("node-1", "Running", true, 1, false))
			},
		},
		{
			name: "deleted",
			log: func(ctx context.Context) error {
				return LogHandler{}.Deleted(ctx, pod("node-1", "Succeeded", false, 0, false))
			},
			want: []string{`"Pod deleted" pod="default/web" phase="Succeeded"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			got := logLines(t, tc.verbosity, func(ctx context.Context) { err = tc.log(ctx) })
			if err != nil {
				t.Fatalf("handler returned %v", err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("log lines:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

// FuzzUpdated feeds the lifecycle comparison pairs of pods with missing or
// odd fields: it must never panic, whatever the API server sends.
func FuzzUpdated(f *testing.F) {
	f.Add("", "node-1", "Pending", "Running", uint8(0), uint8(3), int32(0), int32(1), "app", "app", false, true)
	f.Add("x", "", "", "Unknown", uint8(255), uint8(0), int32(-1), int32(1<<30), "", "ä/..", true, false)
	f.Fuzz(func(t *testing.T, oldNode, node, oldPhase, phase string, oldShape, shape uint8,
		oldRestarts, restarts int32, oldName, name string, oldDeleted, deleted bool) {
		old := fuzzPod(oldNode, oldPhase, oldShape, oldRestarts, oldName, oldDeleted)
		pod := fuzzPod(node, phase, shape, restarts, name, deleted)
		ctx := klog.NewContext(context.Background(), klog.Background().V(10)) // discarded: V(10) is off
		for _, err := range []error{
			LogHandler{}.Created(ctx, pod, oldDeleted),
			LogHandler{}.Updated(ctx, old, pod),
			LogHandler{}.Deleted(ctx, pod),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

// fuzzPod builds a pod whose bits of shape say which optional parts it has:
// conditions (and their status), container statuses (one or two, possibly
// with the same name), a deletion timestamp.
func fuzzPod(node, phase string, shape uint8, restarts int32, container string, deleted bool) *corev1.Pod {
	p := testPod("", container, "", "", corev1.PodPhase(phase))
	p.Spec.NodeName, p.Status.ContainerStatuses = node, nil
	if shape&1 != 0 {
		status := corev1.ConditionStatus([]string{"True", "False", "Unknown", ""}[shape>>6])
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodConditionType(node), Status: status}, {Type: corev1.PodReady, Status: status}}
	}
	if shape&2 != 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: container, RestartCount: restarts}}
	}
	if shape&4 != 0 {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: container, RestartCount: -restarts})
	}
	if shape&8 != 0 && deleted {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

// Each line is logged where it is decided, so klog's header names the line
// of handler.go that logged it (a logging helper would name its own line
// for every message, and a reader of -v output could not find the code).
func TestLogHandlerLinesNameTheirSource(t *testing.T) {
	var buf bytes.Buffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx := klog.NewContext(context.Background(), logger)
	if err := (LogHandler{}).Updated(ctx, pod("", "Pending", false, 0, false), pod("node-1", "Running", true, 1, true)); err != nil {
		t.Fatal(err)
	}
	sources := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, line := range lines {
		source := regexp.MustCompile(`\] `).Split(line, 2)[0]
		source = source[strings.LastIndex(source, " ")+1:]
		if !strings.HasPrefix(source, "handler.go:") {
			t.Errorf("line %q names %s as its source, not handler.go", line, source)
		}
		sources[source] = true
	}
	if len(lines) != 5 || len(sources) != len(lines) {
		t.Errorf("%d lines from %d sources, want 5 lines from 5 different lines of handler.go:\n%s", len(lines), len(sources), buf.String())
	}
}
