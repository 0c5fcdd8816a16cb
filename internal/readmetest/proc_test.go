package readmetest

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// env is where the examples run: a copy of the repository, a directory for
// logs and scripts outside it, and the environment the commands get.
type env struct {
	root    string // the repository the test belongs to
	dir     string // the copy the examples run in (a newcomer's checkout)
	logs    string // process output and generated wrappers
	environ []string
	blocks  map[string]block
}

// newEnv copies the repository (tracked and untracked, not ignored files,
// without node_modules and without what the README's examples create) to a
// temporary directory.
func newEnv(t *testing.T, blocks []block) *env {
	t.Helper()
	e := &env{root: repoRoot(t), dir: filepath.Join(t.TempDir(), "rookery"), logs: t.TempDir(), blocks: map[string]block{}}
	for _, b := range blocks {
		if b.Name != "" && b.Name != "skip" {
			e.blocks[b.Name] = b
		}
	}
	for _, kv := range os.Environ() {
		// A developer's ROOKERY_* variables would change what the printed
		// commands do.
		if !strings.HasPrefix(kv, "ROOKERY_") {
			e.environ = append(e.environ, kv)
		}
	}
	files, err := trackedFiles(e.root)
	if err != nil {
		t.Logf("git ls-files failed (%v); copying the tree as it is", err)
		files = walkFiles(e.root)
	}
	n := 0
	for _, rel := range files {
		if excluded(rel) {
			continue
		}
		src := filepath.Join(e.root, rel)
		fi, err := os.Lstat(src)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, a symlink, a submodule
		}
		dst := filepath.Join(e.dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := copyFile(src, dst, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	t.Logf("copied %d files of %s to %s", n, e.root, e.dir)
	return e
}

// trackedFiles lists the files git would commit: tracked ones and
// untracked ones that are not ignored.
func trackedFiles(root string) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

func walkFiles(root string) []string {
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && (d.Name() == ".git" || (rel != "." && excluded(rel))) {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			files = append(files, rel)
		}
		return nil
	})
	return files
}

// excluded leaves out npm packages and what the README's examples create
// in the repository root (binaries, data directories, certificates).
func excluded(rel string) bool {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for _, p := range parts {
		if p == "node_modules" || p == ".git" {
			return true
		}
	}
	top := parts[0]
	return top == "studio" || top == "certs" || strings.HasPrefix(top, "data")
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// proc is a bash running README text in its own process group.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr string // files
	exited         chan struct{}
	err            error // bash's exit, once exited is closed
	stopped        bool
}

// start runs script in `bash -c` with `set -e`, in the copy, in a new
// process group, its output in files. The process group is stopped when
// the test ends, whatever happens.
func (e *env) start(t *testing.T, name, script string, extraEnv ...string) *proc {
	t.Helper()
	p := &proc{name: name, stdout: filepath.Join(e.logs, name+".out"), stderr: filepath.Join(e.logs, name+".err"), exited: make(chan struct{})}
	stdout, err := os.Create(p.stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	p.cmd = exec.Command("bash", "-c", "set -e\n"+script)
	p.cmd.Dir = e.dir
	p.cmd.Env = append(append([]string{}, e.environ...), extraEnv...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr // files: Wait does not wait for background children
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Logf("%s: $ %s", name, strings.ReplaceAll(strings.TrimSpace(script), "\n", "\n    $ "))
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// wait waits for bash itself to exit (its background children may live on).
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.name, timeout)
	}
}

// output is what the process wrote to stdout so far.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.stdout)
	return string(b)
}

// tail is the end of both outputs, for failure messages.
func (p *proc) tail() string {
	var sb strings.Builder
	for _, f := range []string{p.stdout, p.stderr} {
		b, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(&sb, "--- %s (last %d lines)\n%s\n", filepath.Base(f), len(lines), strings.Join(lines, "\n"))
	}
	return sb.String()
}

// stop sends SIGTERM to the whole process group (bash, go run, the
// servers it started) and waits until no live process of the group is
// left; after 30 s it kills them and fails the test.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	pgid := p.cmd.Process.Pid
	if len(groupMembers(pgid)) == 0 {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if waitGroupGone(pgid, 30*time.Second) {
		return
	}
	t.Errorf("%s: processes %v still running 30 s after SIGTERM; killing them\n%s", p.name, groupMembers(pgid), p.tail())
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if !waitGroupGone(pgid, 10*time.Second) {
		t.Errorf("%s: processes %v survive SIGKILL", p.name, groupMembers(pgid))
	}
}

func waitGroupGone(pgid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if len(groupMembers(pgid)) == 0 {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return len(groupMembers(pgid)) == 0
}

// groupMembers lists the live (not zombie) processes of a process group,
// from /proc: a zombie whose parent does not reap it must not hold the
// test up.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// notRun skips the test with a NOT RUN message, or, when the environment
// has README_TEST_STRICT=1 (.ci/run sets it: CI installs every tool and
// has the ports to itself), fails it: a skipped example must not pass CI
// in silence.
func notRun(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := "NOT RUN: " + fmt.Sprintf(format, args...)
	if os.Getenv("README_TEST_STRICT") == "1" {
		t.Fatal(msg + " (README_TEST_STRICT=1)")
	}
	t.Skip(msg)
}

// needPorts skips the test, saying why, when something else listens on
// one of the README's fixed ports.
func needPorts(t *testing.T, ports ...int) {
	t.Helper()
	for _, port := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			notRun(t, "this README example needs 127.0.0.1:%d, which something else is using (%v); free ports %v and run the test again", port, err, ports)
		}
		l.Close()
	}
}

// waitPortsFree waits until the ports can be bound again after a stop.
func waitPortsFree(t *testing.T, ports ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range ports {
		for {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err == nil {
				l.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("port %d still in use after the example's processes stopped: %v", port, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// waitReady polls base+"/readyz" until it answers 200, failing at once
// when the process ends first.
func waitReady(t *testing.T, p *proc, client *http.Client, base string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if p.hasExited() && len(groupMembers(p.cmd.Process.Pid)) == 0 {
			t.Fatalf("%s ended before %s/readyz answered 200 (%v)\n%s", p.name, base, p.err, p.tail())
		}
		last := ""
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			last = err.Error()
		} else {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz did not answer 200 within %s (last: %s)\n%s", base, timeout, last, p.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
