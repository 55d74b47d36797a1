package fakeapi

import (
	"strings"
	"sync"
	"time"
)

// Log is what demo-controller logs through a logger that writes to it
// (textlogger.Output), one line per entry, without klog's header, with the
// time each came. It prints nothing: a failing check shows the lines that
// matter. Its goroutines may share it.
type Log struct {
	mu    sync.Mutex
	lines []Line
}

// Line is one line of a Log.
type Line struct {
	At   time.Time
	Text string
}

func (l *Log) Write(entry []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	text := KlogHeader.ReplaceAllString(strings.TrimSuffix(string(entry), "\n"), "")
	l.lines = append(l.lines, Line{time.Now(), text})
	return len(entry), nil
}

// Timed returns the lines logged, with their times.
func (l *Log) Timed() []Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Line(nil), l.lines...)
}

// Lines returns the lines logged.
func (l *Log) Lines() []string {
	var texts []string
	for _, line := range l.Timed() {
		texts = append(texts, line.Text)
	}
	return texts
}

// Last returns the last n lines logged.
func (l *Log) Last(n int) []string {
	lines := l.Lines()
	return lines[max(0, len(lines)-n):]
}

// Logged says what lines were logged, if any: "Nothing was logged.", or
// "The last lines logged:" and the lines, indented.
func Logged(lines []string) string {
	if len(lines) == 0 {
		return "Nothing was logged."
	}
	return "The last lines logged:\n  " + strings.Join(lines, "\n  ")
}
