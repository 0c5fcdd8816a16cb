package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/client"
)

const smuggleUsage = `Usage:
  studio export --url URL --database DB --out FILE [flags]
  studio import --url URL --database DB --in FILE [flags]

Export writes a database to a .ravendbdump file (RavenDB's format, gzip unless
--zstd); import reads one (from RavenDB 4.2 to 7.x, or Rookery) into a database.
On a terminal a progress line is shown; otherwise nothing is printed unless
something fails (for cron). The exit status is 0 only when everything went.

`

// runSmuggle runs `studio export` and `studio import`.
func runSmuggle(verb string, args []string, stdout, stderr io.Writer) error {
	var (
		url, database, file, types, collections, certFile, caFile, transform string
		useZstd, quiet, create                                               bool
	)
	fs := flag.NewFlagSet("studio "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&url, "url", "http://127.0.0.1:8080", "a node of the cluster (comma-separated for several)")
	fs.StringVar(&database, "database", "", "the database (required)")
	if verb == "export" {
		fs.StringVar(&file, "out", "", "the dump file to write (required; - for standard output)")
		fs.BoolVar(&useZstd, "zstd", false, "compress with zstd (RavenDB 6.x and later read it) instead of gzip")
		fs.StringVar(&collections, "collections", "", "only these collections, comma-separated")
	} else {
		fs.StringVar(&file, "in", "", "the dump file to read (required; - for standard input)")
		fs.BoolVar(&create, "create", false, "create the database when it does not exist")
	}
	fs.StringVar(&types, "types", "", "item types, comma-separated (Documents,Conflicts,Indexes,Identities,Subscriptions,DatabaseRecord); all when empty")
	fs.StringVar(&transform, "transform", "", "a JavaScript transform run on each document (this is the document; throw 'skip' leaves it out)")
	fs.StringVar(&certFile, "cert", "", "client certificate and key, one PEM file (a secured cluster)")
	fs.StringVar(&caFile, "ca", "", "CA certificate(s) to trust for the nodes' certificates, PEM")
	fs.BoolVar(&quiet, "quiet", false, "no progress line even on a terminal")
	fs.Usage = func() {
		fmt.Fprint(stderr, smuggleUsage, "Flags of studio "+verb+":\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %v", verb, fs.Args())
	}
	if database == "" || file == "" {
		fs.Usage()
		return fmt.Errorf("%s: --database and --%s are required", verb, map[string]string{"export": "out", "import": "in"}[verb])
	}
	conv := client.DefaultConventions()
	var err error
	if certFile != "" {
		if conv.Certificate, err = client.LoadCertificate(certFile); err != nil {
			return err
		}
	}
	if caFile != "" {
		if conv.TrustedCAs, err = client.LoadTrustedCAs(caFile); err != nil {
			return err
		}
	}
	conv.DisableTopologyUpdates = true // the node given, not the topology's first
	store := client.NewDocumentStoreWithConventions(splitList(url), database, conv)
	defer store.Close()
	if create {
		var exists *client.ConcurrencyError
		if err := store.CreateDatabase(context.Background(), database); err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("import: creating %s: %w", database, err)
		}
	}
	opts := client.SmugglerOptions{TransformScript: transform}
	if types != "" {
		opts.OperateOnTypes = splitList(types)
	}
	if collections != "" {
		opts.Collections = splitList(collections)
	}
	if useZstd {
		opts.CompressionAlgorithm = "Zstd"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	show := !quiet && isTerminal(os.Stderr)
	var done atomic.Int64
	var total int64
	began := time.Now()
	var res *client.SmugglerResult
	progress := newProgressLine(stderr, show, func() string {
		n := done.Load()
		if total > 0 {
			pct := float64(n) * 100 / float64(total)
			bar := strings.Repeat("#", int(pct/5)) + strings.Repeat(".", 20-int(pct/5))
			return fmt.Sprintf("%s %s [%s] %5.1f%% %s of %s", verb, database, bar, pct, formatSize(n), formatSize(total))
		}
		return fmt.Sprintf("%s %s: %s in %s", verb, database, formatSize(n), time.Since(began).Round(time.Second))
	})
	if verb == "export" {
		var w io.Writer = os.Stdout
		var f *os.File
		if file != "-" {
			if f, err = os.Create(file); err != nil {
				return err
			}
			w = f
		}
		res, err = store.Smuggler().Export(ctx, opts, &countingWriter{w: w, n: &done})
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				_ = os.Remove(file) // never leave half a dump that looks whole
			}
		}
	} else {
		var r io.Reader = os.Stdin
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			if fi, err := f.Stat(); err == nil {
				total = fi.Size()
			}
			r = f
		}
		res, err = store.Smuggler().Import(ctx, opts, &countingReader{r: r, n: &done})
	}
	progress.stop()
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, database, err)
	}
	if show {
		fmt.Fprintf(stderr, "%s %s: %d documents, %d indexes, %d identities, %d subscriptions, %s, in %s\n", verb, database,
			res.Documents.ReadCount, res.Indexes.ReadCount, res.Identities.ReadCount, res.Subscriptions.ReadCount,
			formatSize(done.Load()), time.Since(began).Round(100*time.Millisecond))
		for _, m := range res.Messages {
			if strings.Contains(m, "WARN") || strings.Contains(m, "ERROR") {
				fmt.Fprintln(stderr, "  "+m)
			}
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine redraws one line on a terminal every 200 ms.
type progressLine struct {
	quit chan struct{}
	done chan struct{}
}

func newProgressLine(w io.Writer, show bool, line func() string) *progressLine {
	p := &progressLine{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if !show {
			<-p.quit
			return
		}
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				fmt.Fprintf(w, "\r\033[K")
				return
			case <-t.C:
				fmt.Fprintf(w, "\r\033[K%s", line())
			}
		}
	}()
	return p
}

func (p *progressLine) stop() {
	close(p.quit)
	<-p.done
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
