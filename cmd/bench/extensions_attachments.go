package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

var (
	attachmentMB     = flag.Int("attachment-mb", 64, "extensions section: size of the attachment uploaded and downloaded, in MiB (0 skips the attachments part)")
	attachmentRounds = flag.Int("attachment-rounds", 3, "extensions section: attachments uploaded and downloaded (each new content)")
)

// attachmentsBench measures attachment throughput through the HTTP API (PUT
// …/attachments in, GET out) against writing the same bytes to a file with
// fsync and reading them back, in the same run. The content is generated
// (different each round, so nothing is deduplicated).
func attachmentsBench(out io.Writer, dir, url string) error {
	mb, rounds := *attachmentMB, *attachmentRounds
	if mb <= 0 || rounds <= 0 {
		return nil
	}
	size := int64(mb) << 20
	fmt.Fprintf(out, "\n## Attachments: %d MiB each, %d rounds (HTTP on loopback, one node) against a raw file\n", mb, rounds)
	if err := createDB(url, "benchatt"); err != nil {
		return err
	}
	if _, code, err := doWith(http.DefaultClient, "PUT", url+"/databases/benchatt/docs?id=files/1", []byte(`{"@metadata":{"@collection":"Files"}}`)); err != nil || code != 201 {
		return fmt.Errorf("put files/1: %d %v", code, err)
	}
	buf := make([]byte, size)
	raw := filepath.Join(dir, "attachment-raw.bin")
	defer os.Remove(raw)
	var in, out1, rawIn, rawOut time.Duration
	for r := 0; r < rounds; r++ {
		rng := rand.New(rand.NewPCG(uint64(r), 99))
		for i := 0; i+8 <= len(buf); i += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				buf[i+k] = byte(v >> (8 * k))
			}
		}
		name := fmt.Sprintf("blob-%d.bin", r)
		start := time.Now()
		req, _ := http.NewRequest("PUT", url+"/databases/benchatt/attachments?id=files/1&name="+name, bytes.NewReader(buf))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("PUT attachment: %d", resp.StatusCode)
		}
		in += time.Since(start)

		start = time.Now()
		resp, err = http.Get(url + "/databases/benchatt/attachments?id=files/1&name=" + name)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size {
			return fmt.Errorf("GET attachment: %d bytes, %v", n, err)
		}
		out1 += time.Since(start)

		start = time.Now()
		f, err := os.Create(raw)
		if err != nil {
			return err
		}
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		f.Close()
		rawIn += time.Since(start)

		start = time.Now()
		f, err = os.Open(raw)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, f, make([]byte, 256<<10))
		f.Close()
		if err != nil {
			return err
		}
		rawOut += time.Since(start)
	}
	total := float64(size*int64(rounds)) / (1 << 20)
	rate := func(d time.Duration) float64 { return total / d.Seconds() }
	fmt.Fprintf(out, "| | MB/s | |\n|---|---|---|\n")
	fmt.Fprintf(out, "| attachment in (PUT, staged + stored, fsync'd commit) | %.0f | raw file write + fsync: %.0f (%.0f%%) |\n", rate(in), rate(rawIn), 100*rate(in)/rate(rawIn))
	fmt.Fprintf(out, "| attachment out (GET, streamed by chunk) | %.0f | raw file read: %.0f (%.0f%%) |\n", rate(out1), rate(rawOut), 100*rate(out1)/rate(rawOut))
	return nil
}
