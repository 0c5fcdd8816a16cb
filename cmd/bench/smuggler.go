package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// childNode is the studio binary run as a process of its own, so that its
// memory (peak RSS) is measured apart from the bench's.
type childNode struct {
	cmd *exec.Cmd
	url string
}

func startChild(dir string) (*childNode, error) {
	bin := filepath.Join(dir, "studio")
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(gomod)) == 0 {
		return nil, fmt.Errorf("run the bench inside the repository (go env GOMOD: %v)", err)
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/studio")
	build.Dir = filepath.Dir(string(bytes.TrimSpace(gomod)))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the studio: %w", err)
	}
	addr, raft := freeAddr(), freeAddr()
	if addr == "" || raft == "" {
		return nil, fmt.Errorf("no free port")
	}
	log, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--http", addr, "--raft-addr", raft, "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &childNode{cmd: cmd, url: "http://" + addr}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(n.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return n, nil
			}
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, fmt.Errorf("the node did not become ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

func (n *childNode) stop() {
	_ = n.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// resetPeak starts a new peak RSS measurement of the node (Linux: writing
// 5 to clear_refs resets VmHWM).
func (n *childNode) resetPeak() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", n.cmd.Process.Pid), []byte("5"), 0)
}

// peakMB is the node's peak RSS since the last reset, in MB.
func (n *childNode) peakMB() float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(sc.Text())[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// cpu is the node's CPU time (user and system) so far, from
// /proc/<pid>/stat (clock ticks of 10 ms); 0 where there is no /proc.
func (n *childNode) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// exportTo streams db's dump into path and returns how long it took.
func exportTo(url, db, path string) (time.Duration, int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	start := time.Now()
	resp, err := http.Post(url+"/databases/"+db+"/smuggler/export", "application/json", strings.NewReader(`{}`))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return 0, 0, fmt.Errorf("export: %d %s", resp.StatusCode, b)
	}
	n, err := io.Copy(f, resp.Body)
	return time.Since(start), n, err
}

// importFrom streams the dump at path into db as multipart, as the npm
// client and the studio send it.
func importFrom(url, db, path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			if err := mw.WriteField("importOptions", "{}"); err != nil {
				return err
			}
			fw, err := mw.CreateFormFile("file", filepath.Base(path))
			if err != nil {
				return err
			}
			if _, err := io.Copy(fw, f); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	start := time.Now()
	resp, err := http.Post(url+"/databases/"+db+"/smuggler/import", mw.FormDataContentType(), pr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("import: %d %s", resp.StatusCode, b)
	}
	if !bytes.Contains(b, []byte(`"Documents"`)) {
		return 0, fmt.Errorf("import: no result: %s", b)
	}
	return time.Since(start), nil
}

// smugglerBench measures export and import docs/s for n documents against
// the HTTP bulk insert of the same documents in the same run (4 clients,
// batches of 1000), with the node's peak RSS in each phase; the export's
// peak is also taken for a tenth of the documents, to show it does not grow
// with the database.
func smugglerBench(out io.Writer, dir string, n int) error {
	node, err := startChild(dir)
	if err != nil {
		return err
	}
	defer node.stop()
	docs := makeDocs(n)
	small := max(n/10, 1)
	if err := createDB(node.url, "small"); err != nil {
		return err
	}
	if _, err := postBodies(http.DefaultClient, node.url, "small", bulkBodies(docs[:small], 1000), 4, small); err != nil {
		return err
	}
	if err := createDB(node.url, "bulk"); err != nil {
		return err
	}
	bodies := bulkBodies(docs, 1000)
	docs = nil
	node.resetPeak()
	cpu0 := node.cpu()
	bulkRate, err := postBodies(http.DefaultClient, node.url, "bulk", bodies, 4, n)
	if err != nil {
		return err
	}
	bulkPeak := node.peakMB()
	bulkCPU := perDoc(node.cpu()-cpu0, n)
	bodies = nil

	node.resetPeak()
	if _, _, err := exportTo(node.url, "small", filepath.Join(dir, "small.ravendbdump")); err != nil {
		return err
	}
	smallPeak := node.peakMB()
	path := filepath.Join(dir, "bulk.ravendbdump")
	node.resetPeak()
	took, size, err := exportTo(node.url, "bulk", path)
	if err != nil {
		return err
	}
	exportPeak := node.peakMB()
	exportRate := float64(n) / took.Seconds()

	if err := createDB(node.url, "imported"); err != nil {
		return err
	}
	node.resetPeak()
	cpu0 = node.cpu()
	took, err = importFrom(node.url, "imported", path)
	if err != nil {
		return err
	}
	importPeak := node.peakMB()
	importCPU := perDoc(node.cpu()-cpu0, n)
	importRate := float64(n) / took.Seconds()

	fmt.Fprintf(out, "\n## Import and export (N=%d, %d-byte documents; the node is a separate process)\n", n, 750)
	fmt.Fprintf(out, "HTTP bulk insert (4 clients, 1000 per request)   %9.0f docs/s   node peak RSS %6.0f MB   node CPU %5.1f µs/doc\n", bulkRate, bulkPeak, bulkCPU)
	fmt.Fprintf(out, "export (one request, streamed to a file, gzip)   %9.0f docs/s   node peak RSS %6.0f MB   (%.2fx bulk insert; dump %.1f MB)\n", exportRate, exportPeak, exportRate/bulkRate, float64(size)/(1<<20))
	fmt.Fprintf(out, "import (one multipart request, streamed)          %9.0f docs/s   node peak RSS %6.0f MB   node CPU %5.1f µs/doc   (%.2fx bulk insert, target >= 0.8x)\n", importRate, importPeak, importCPU, importRate/bulkRate)
	fmt.Fprintf(out, "export peak RSS with %d documents %.0f MB, with %d documents %.0f MB (%.2fx for %dx the documents)\n", small, smallPeak, n, exportPeak, exportPeak/max(smallPeak, 1), n/small)
	return nil
}

// perDoc is d spread over n documents, in microseconds.
func perDoc(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / float64(max(n, 1))
}
