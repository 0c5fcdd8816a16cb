//go:build linux

package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Stopping `go run ./cmd/studio` by its process id stops the server too
// (the README's first command): before, go run died and the server it had
// started went on, orphaned, holding the port. The test runs the README's
// way, go run in the repository, and sends SIGTERM to go run's process only.
func TestGoRunStoppedByPIDStopsTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the studio with go run")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(goBin, "run", "./cmd/studio", "serve", "--http", addr, "--raft-addr", freeAddr(t), "--data-dir", filepath.Join(t.TempDir(), "data"))
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GOFLAGS=") // a plain build, as a newcomer's
	log := filepath.Join(t.TempDir(), "server.log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that only go run gets the signal, as from
	// `kill <pid>` in another terminal; the cleanup ends the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	url := "http://" + addr + "/readyz"
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(4 * time.Minute) // go run compiles first
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			t.Fatalf("the server under go run did not become ready: %v\n%s", err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline = time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(url)
		if err != nil {
			break // the port no longer answers: the server stopped
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			t.Fatalf("the server still answers on %s 30 s after its go run was stopped\n%s", addr, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(log)
	t.Logf("server log:\n%s", b)
}
