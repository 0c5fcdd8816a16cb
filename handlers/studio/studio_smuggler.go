package studio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/conflicts"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/operations"
	"github.com/rookerydb/rookery/backend/smuggler"
	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// The Import/Export pages: a database's (export with its options, the
// download and the command lines for a shell or cron; import of a file
// through the API's multipart endpoint; the operations with their
// progress and results) and the server's (several databases to and from
// a directory below --dump-dir). The work itself is backend/smuggler's,
// run as operations of the node's registry, which the pages follow live.

const (
	// smugglerOpsShown bounds the operations a page lists (the registry
	// keeps finished ones for 15 minutes).
	smugglerOpsShown = 10
	// smugglerDumpsShown bounds the dumps the server page lists.
	smugglerDumpsShown = 1000
	// smugglerDirsShown bounds the directories it offers.
	smugglerDirsShown = 200
	// maxFileName bounds the export's file name.
	maxFileName = 200
)

func (s *Studio) registerSmuggler(g, db *echo.Group) {
	db.GET("/smuggler", s.smugglerPage)
	db.POST("/smuggler/cancel", s.smugglerCancel)
	s.addLive("smuggler", s.smugglerLive, false)

	g.GET("/smuggler", s.serverSmugglerPage)
	g.POST("/smuggler/export", s.serverSmugglerExport)
	g.POST("/smuggler/import", s.serverSmugglerImport)
	g.POST("/smuggler/cancel", s.serverSmugglerCancel)
	s.addLive("server-smuggler", s.serverSmugglerLive, false)
}

// exportForm reads the export's options from the page's query ("o" marks
// a submitted form: unticked boxes are absent), or the defaults.
func (s *Studio) exportForm(q url.Values, db *storage.DB, now time.Time) views.ExportForm {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	f := views.ExportForm{Database: db.Name(), Types: map[string]bool{}, Chosen: map[string]bool{}, Compression: "Gzip",
		Script: views.DefaultTransformScript, Secured: s.ServerCertificate != "", CertFile: "admin.pem", CAFile: "ca.pem"}
	for _, c := range db.Stats().Collections {
		if c.Docs > 0 {
			f.Collections = append(f.Collections, c.Name)
		}
	}
	sort.Slice(f.Collections, func(i, j int) bool { return strings.ToLower(f.Collections[i]) < strings.ToLower(f.Collections[j]) })
	submitted := get("o") != ""
	for _, t := range views.SmugglerTypes {
		f.Types[t.Name] = !submitted
	}
	f.IncludeExpired = !submitted || get("expired") == "true"
	if !submitted {
		f.FileName = defaultDumpName(db.Name(), now)
		return f
	}
	for _, t := range q["type"] {
		if _, ok := f.Types[t]; ok {
			f.Types[t] = true
		}
	}
	for _, c := range q["collection"] {
		for _, have := range f.Collections {
			if strings.EqualFold(c, have) {
				f.Chosen[have] = true
			}
		}
	}
	if strings.EqualFold(get("compression"), "zstd") {
		f.Compression = "Zstd"
	}
	f.FileName = cleanFileName(get("file"))
	if f.FileName == "" {
		f.FileName = defaultDumpName(db.Name(), now)
	}
	f.Transform = get("transform") == "on"
	if _, ok := q["script"]; ok {
		f.Script = get("script")
	}
	if v := strings.TrimSpace(get("cert")); v != "" {
		f.CertFile = v
	}
	if v := strings.TrimSpace(get("cacert")); v != "" {
		f.CAFile = v
	}
	return f
}

// defaultDumpName is RavenDB's studio's name for a dump.
func defaultDumpName(db string, now time.Time) string {
	return "Dump of " + db + " " + now.UTC().Format("2006-01-02 15-04")
}

// cleanFileName keeps a file name a name: no directories, no control
// characters, no .ravendbdump (added), at most maxFileName bytes.
func cleanFileName(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '/' || r == '\\':
			return '-'
		case r < 0x20 || r == 0x7f:
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), smuggler.Ext))
	for len(s) > maxFileName {
		_, n := lastRune(s)
		s = s[:len(s)-n]
	}
	return strings.Trim(s, ". ")
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, 1
}

// exportOptions are the engine's options for the form.
func exportOptions(f views.ExportForm) smuggler.Options {
	var types []string
	for _, t := range views.SmugglerTypes {
		if f.Types[t.Name] {
			types = append(types, t.Name)
		}
	}
	exp := f.IncludeExpired
	o := smuggler.Options{OperateOnTypes: strings.Join(types, ","), IncludeExpired: &exp, CompressionAlgorithm: f.Compression, FileName: f.FileName}
	if len(types) == 0 {
		o.OperateOnTypes = "None"
	}
	for _, c := range f.Collections {
		if f.Chosen[c] {
			o.Collections = append(o.Collections, c)
		}
	}
	if f.Transform {
		o.TransformScript = f.Script
	}
	return o
}

// exportCommand is what the form makes: the download's DownloadOptions
// (the options as JSON, FileName included) and the command lines.
func (s *Studio) exportCommand(f views.ExportForm) views.ExportCommand {
	o := exportOptions(f)
	cmd := views.ExportCommand{Secured: f.Secured, CertFile: f.CertFile, CAFile: f.CAFile}
	if o.OperateOnTypes == "None" {
		cmd.Problem = "Nothing to export: tick at least one item type."
	}
	if err := o.Check(); err != nil {
		cmd.Problem = err.Error()
	} else if err := o.CheckScript(); err != nil {
		cmd.Problem = "The transform script does not compile: " + err.Error()
	}
	dto := map[string]any{"OperateOnTypes": o.OperateOnTypes, "IncludeExpired": *o.IncludeExpired, "FileName": f.FileName}
	if len(o.Collections) > 0 {
		dto["Collections"] = o.Collections
	}
	if strings.TrimSpace(o.TransformScript) != "" {
		dto["TransformScript"] = o.TransformScript
	}
	if f.Compression == "Zstd" {
		dto["CompressionAlgorithm"] = "Zstd"
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(dto)
	cmd.DownloadOptions = strings.TrimSpace(b.String())
	base := ""
	if s.URL != nil {
		base = s.URL()
	}
	c := smuggler.ExportCommands(smuggler.CommandOptions{ServerURL: base, Database: f.Database, FileName: f.FileName,
		Secured: f.Secured, CertFile: f.CertFile, CAFile: f.CAFile}, o)
	cmd.Bash, cmd.PowerShell, cmd.Cron = c.Bash, c.PowerShell, c.Cron
	return cmd
}

// defaultImportOptions is the importOptions a browser without JavaScript
// sends: every item type the page offers.
func defaultImportOptions() string {
	var types []string
	for _, t := range views.SmugglerTypes {
		types = append(types, t.Name)
	}
	b, _ := json.Marshal(map[string]any{"OperateOnTypes": strings.Join(types, ","), "IncludeExpired": true})
	return string(b)
}

func (s *Studio) smugglerPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, c.Param("db"), err)
	}
	f := s.exportForm(c.QueryParams(), db, time.Now())
	if c.QueryParam("part") == "command" {
		return s.smugglerCommand(c, f)
	}
	p := views.SmugglerPage{Database: db.Name(), Export: f, Command: s.exportCommand(f),
		Import: views.ImportForm{Database: db.Name(), Defaults: defaultImportOptions(), Script: views.DefaultTransformScript},
		Ops:    s.smugglerOps(c.Request().Context(), db.Name())}
	ch := s.chrome(c, "Import/Export · "+db.Name(), db.Name(), views.NavSmuggler, "smuggler")
	// The live region does not depend on the options (a long script
	// stays out of the websocket's URL).
	ch.Query = nil
	return render(c, http.StatusOK, ch, views.SmugglerPageView(p))
}

// smugglerCommand answers the page with ?part=command: only the command
// box for the options in the query (the page's script fetches it as the
// options change).
func (s *Studio) smugglerCommand(c echo.Context, f views.ExportForm) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	return views.ExportCommandBox(s.exportCommand(f)).Render(c.Request().Context(), c.Response())
}

func (s *Studio) smugglerLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	db := ""
	if v := q["db"]; len(v) > 0 {
		db = v[0]
	}
	d, err := s.Catalog.Get(db)
	if err != nil {
		return nil, nil
	}
	return []views.Fragment{{ID: "smuggler-ops", C: views.SmugglerOps(d.Name(), s.smugglerOps(ctx, d.Name()))}}, nil
}

// smugglerOps are a database's imports and exports (""'s: the server's),
// newest first.
func (s *Studio) smugglerOps(_ context.Context, db string) []views.SmugglerOp {
	if s.Operations == nil {
		return nil
	}
	var out []views.SmugglerOp
	for _, info := range s.Operations.List(db) {
		if !isSmuggler(info.Kind) {
			continue
		}
		out = append(out, smugglerOp(info))
		if len(out) == smugglerOpsShown {
			break
		}
	}
	return out
}

func isSmuggler(kind string) bool {
	switch kind {
	case smuggler.KindExport, smuggler.KindImport, smuggler.KindServerExport, smuggler.KindServerImport:
		return true
	}
	return false
}

func (s *Studio) smugglerCancel(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, c.Param("db"), err)
	}
	back := string(views.DBURL(db.Name(), "smuggler"))
	if err := s.cancelSmuggler(db.Name(), c.FormValue("op")); err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	return redirectFlash(c, back, "Operation "+c.FormValue("op")+" cancelled.", false)
}

func (s *Studio) serverSmugglerCancel(c echo.Context) error {
	if err := s.cancelSmuggler("", c.FormValue("op")); err != nil {
		return redirectFlash(c, "/studio/smuggler", err.Error(), true)
	}
	return redirectFlash(c, "/studio/smuggler", "Operation "+c.FormValue("op")+" cancelled.", false)
}

func (s *Studio) cancelSmuggler(db, op string) error {
	id, err := strconv.ParseInt(op, 10, 64)
	if err != nil || s.Operations == nil {
		return dberr.New(dberr.BadRequest, "%q is not an operation", op)
	}
	info, err := s.Operations.Get(db, id)
	if err != nil {
		return err
	}
	if !isSmuggler(info.Kind) {
		return dberr.New(dberr.BadRequest, "operation %d is not an import or export", id)
	}
	return s.Operations.Kill(db, id)
}

// The operations' progress and results are the engine's SmugglerResult
// (and the server's list of them) as JSON; the pages read them back typed.

type snapCounts struct {
	Processed                             bool
	Skipped                               bool
	ReadCount, ErroredCount, SkippedCount int64
	Attachments                           *struct{ ReadCount int64 }
}

type snapResult struct {
	DatabaseRecord, Documents, RevisionDocuments, Tombstones, Conflicts, Identities, Indexes,
	CompareExchange, Subscriptions, Counters, TimeSeries snapCounts
	Messages []string
	Elapsed  string
	Position *smuggler.Position
}

type snapMulti struct {
	Databases []struct {
		Name   string
		Result snapResult
		Error  string
	}
}

func decode(v any, into any) bool {
	if v == nil {
		return false
	}
	b, err := json.Marshal(v)
	return err == nil && json.Unmarshal(b, into) == nil
}

func opState(status string) string {
	switch status {
	case operations.Completed:
		return "completed"
	case operations.Faulted:
		return "failed"
	case operations.Canceled:
		return "cancelled"
	}
	return "running"
}

// smugglerOp turns an operation of the registry into what the pages show.
func smugglerOp(info operations.Info) views.SmugglerOp {
	o := views.SmugglerOp{ID: info.ID, Database: info.Database, Description: info.Description, State: opState(info.State.Status),
		Started: info.Started, Killable: info.Killable}
	switch info.Kind {
	case smuggler.KindExport:
		o.Kind = "Export"
	case smuggler.KindImport:
		o.Kind = "Import"
	case smuggler.KindServerExport:
		o.Kind = "Server export"
	case smuggler.KindServerImport:
		o.Kind = "Server import"
	default:
		o.Kind = info.Kind
	}
	// The figures: the result once completed, the last progress otherwise
	// (a failed job keeps what it did before the error there).
	src := info.State.Progress
	if info.State.Status == operations.Completed && info.State.Result != nil {
		src = info.State.Result
	}
	if ex, ok := info.State.Result.(operations.ExceptionResult); ok {
		o.Error = ex.Message
	}
	if info.Kind == smuggler.KindServerExport || info.Kind == smuggler.KindServerImport {
		var m snapMulti
		decode(src, &m)
		for i, d := range m.Databases {
			p := views.SmugglerPart{Name: d.Name, State: "completed", Error: d.Error, Rows: resultRows(d.Result), Messages: messages(d.Result.Messages)}
			if d.Result.Position != nil {
				p.Done, p.Total = d.Result.Position.Done, d.Result.Position.Total
			}
			switch {
			case d.Error != "":
				p.State = "failed"
			case i == len(m.Databases)-1 && o.State != "completed":
				p.State = o.State
			}
			o.Parts = append(o.Parts, p)
		}
		if !info.Ended.IsZero() {
			o.Elapsed = humanDuration(info.Ended.Sub(info.Started))
		}
		return o
	}
	var r snapResult
	if decode(src, &r) {
		o.Rows = resultRows(r)
		o.Messages = messages(r.Messages)
		if r.Position != nil {
			o.Done, o.Total, o.Unit = r.Position.Done, r.Position.Total, r.Position.Unit
		}
	}
	if !info.Ended.IsZero() {
		o.Elapsed = humanDuration(info.Ended.Sub(info.Started))
	}
	return o
}

// resultRows are a result's counts per item type: the ones Rookery stores
// first, then the ones it only counts; a type the job never met is left
// out.
func resultRows(r snapResult) []views.SmugglerRow {
	var out []views.SmugglerRow
	add := func(name string, c snapCounts, notStored bool) {
		att := int64(0)
		if c.Attachments != nil {
			att = c.Attachments.ReadCount
		}
		if !c.Processed && c.ReadCount == 0 && c.SkippedCount == 0 && c.ErroredCount == 0 && att == 0 {
			return
		}
		out = append(out, views.SmugglerRow{Type: name, Read: c.ReadCount, Skipped: c.SkippedCount, Errored: c.ErroredCount, Attachments: att, NotStored: notStored})
	}
	add("Documents", r.Documents, false)
	add("Conflicts", r.Conflicts, false)
	add("Indexes", r.Indexes, false)
	add("Identities", r.Identities, false)
	add("Subscriptions", r.Subscriptions, false)
	add("DatabaseRecord", r.DatabaseRecord, false)
	add("RevisionDocuments", r.RevisionDocuments, false)
	add("Tombstones", r.Tombstones, true)
	add("CompareExchange", r.CompareExchange, false)
	add("Counters", r.Counters, false)
	add("TimeSeries", r.TimeSeries, false)
	return out
}

// messages splits the engine's "[15:04:05 WARN] text" lines.
func messages(in []string) []views.SmugglerMessage {
	out := make([]views.SmugglerMessage, 0, len(in))
	for _, m := range in {
		msg := views.SmugglerMessage{Level: "INFO", Text: m}
		if strings.HasPrefix(m, "[") {
			if head, text, ok := strings.Cut(m[1:], "] "); ok {
				if t, lvl, ok := strings.Cut(head, " "); ok {
					msg = views.SmugglerMessage{Time: t, Level: lvl, Text: text}
				}
			}
		}
		out = append(out, msg)
	}
	return out
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return d.Round(time.Second).String()
}

// runningOps are the running operations the viewer may see, for the
// header: a database's to who may read it, the server's to Operators.
func (s *Studio) runningOps(ctx context.Context) []views.RunningOp {
	if s.Operations == nil {
		return nil
	}
	id := auth.FromContext(ctx)
	var out []views.RunningOp
	for _, info := range s.Operations.Running() {
		if info.Database != "" && !id.Allows(auth.DatabaseRead, info.Database) || info.Database == "" && !id.Allows(auth.OperatorOnly, "") {
			continue
		}
		r := views.RunningOp{ID: info.ID, Database: info.Database}
		switch info.Kind {
		case smuggler.KindExport, smuggler.KindImport:
			o := smugglerOp(info)
			r.Label = o.Kind + " of " + info.Database
			if info.Kind == smuggler.KindImport {
				r.Label = "Import into " + info.Database
			}
			r.Known, r.Percent = o.Total > 0, o.Percent()
			r.Figures = views.Num(o.Documents()) + " documents"
			r.Link = string(views.SmugglerURL(info.Database, info.ID))
		case smuggler.KindServerExport, smuggler.KindServerImport:
			o := smugglerOp(info)
			r.Label = o.Kind
			if d := info.Description; d != "" {
				r.Label = strings.ToUpper(d[:1]) + d[1:]
			}
			done := 0
			for _, p := range o.Parts {
				if p.State == "completed" || p.State == "failed" {
					done++
				}
			}
			r.Figures = views.Num(int64(done)) + " databases done"
			r.Link = "/studio/smuggler#op-" + strconv.FormatInt(info.ID, 10)
		case conflicts.OperationKind:
			r.Label = "Conflict resolution · " + info.Database
			if rp, ok := info.State.Progress.(conflicts.RunProgress); ok {
				if rp.Total > 0 {
					r.Known, r.Percent = true, min(100, rp.Processed*100/rp.Total)
				}
				r.Figures = views.Num(int64(rp.Resolved)) + " resolved, " + views.Num(int64(rp.Processed)) + " of " + views.Num(int64(rp.Total)) + " looked at"
				r.Link = string(views.DBURL(info.Database, "conflicts")) + "#op-" + strconv.FormatInt(rp.Operation, 10)
			}
		default:
			r.Label = info.Kind
			if info.Database != "" {
				r.Label += " · " + info.Database
			}
		}
		out = append(out, r)
	}
	return out
}

// The server page.

func (s *Studio) serverSmugglerView(ctx context.Context, dir string) views.ServerSmugglerPage {
	dir = strings.TrimSpace(dir)
	p := views.ServerSmugglerPage{Root: s.DumpDir, Dir: dir, Types: map[string]bool{}}
	for _, t := range views.SmugglerTypes {
		p.Types[t.Name] = true
	}
	id := auth.FromContext(ctx)
	for _, n := range s.Catalog.Names() {
		if id.Allows(auth.DatabaseRead, n) {
			p.Databases = append(p.Databases, n)
		}
	}
	sort.Slice(p.Databases, func(i, j int) bool { return strings.ToLower(p.Databases[i]) < strings.ToLower(p.Databases[j]) })
	p.ExportDir = time.Now().UTC().Format("2006-01-02-1504")
	p.Dirs = dumpDirs(s.DumpDir)
	p.Dumps, p.DirError = s.dumps(dir)
	p.Ops = s.smugglerOps(ctx, "")
	return p
}

// dumpDirs are the dump directory's subdirectories, two levels deep.
func dumpDirs(root string) []string {
	var out []string
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		out = append(out, e.Name())
		sub, _ := os.ReadDir(filepath.Join(root, e.Name()))
		for _, se := range sub {
			if se.IsDir() && !strings.HasPrefix(se.Name(), ".") {
				out = append(out, e.Name()+"/"+se.Name())
			}
		}
		if len(out) >= smugglerDirsShown {
			break
		}
	}
	sort.Strings(out)
	return out[:min(len(out), smugglerDirsShown)]
}

// dumps lists the dumps of dir (below the dump directory).
func (s *Studio) dumps(dir string) ([]views.DumpFile, string) {
	path, err := smuggler.DumpPath(s.DumpDir, dir)
	if err != nil {
		return nil, err.Error()
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if dir == "" {
			return nil, ""
		}
		return nil, fmt.Sprintf("There is no directory %s in the dump directory.", dir)
	}
	files, err := smuggler.DirEntries(path)
	if err != nil {
		return nil, err.Error()
	}
	var out []views.DumpFile
	for _, name := range smuggler.SortedNames(files) {
		fi, err := os.Stat(files[name])
		if err != nil {
			continue
		}
		out = append(out, views.DumpFile{Name: name, Size: fi.Size(), Modified: fi.ModTime()})
		if len(out) == smugglerDumpsShown {
			break
		}
	}
	return out, ""
}

func (s *Studio) serverSmugglerPage(c echo.Context) error {
	dir := c.QueryParam("dir")
	ch := s.chrome(c, "Import/Export", "", views.NavServerSmuggler, "server-smuggler")
	return render(c, http.StatusOK, ch, views.ServerSmugglerPageView(s.serverSmugglerView(c.Request().Context(), dir)))
}

func (s *Studio) serverSmugglerLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	dir := ""
	if v := q["dir"]; len(v) > 0 {
		dir = v[0]
	}
	p := s.serverSmugglerView(ctx, dir)
	return []views.Fragment{
		{ID: "dump-list", C: views.DumpList(p)},
		{ID: "server-smuggler-ops", C: views.ServerSmugglerOps(p.Ops)},
	}, nil
}

// serverOptions are the server page's options: the item types ticked.
func serverOptions(types []string) (smuggler.Options, error) {
	var chosen []string
	for _, t := range views.SmugglerTypes {
		for _, x := range types {
			if x == t.Name {
				chosen = append(chosen, t.Name)
			}
		}
	}
	if len(chosen) == 0 {
		return smuggler.Options{}, dberr.New(dberr.BadRequest, "Nothing to export: tick at least one item type.")
	}
	o := smuggler.Options{OperateOnTypes: strings.Join(chosen, ",")}
	return o, o.Check()
}

func serverBack(dir string, op int64) string {
	u := string(views.ServerSmugglerURL(dir))
	if op > 0 {
		u += "#op-" + strconv.FormatInt(op, 10)
	}
	return u
}

// serverSmugglerExport exports the ticked databases to a directory below
// --dump-dir, as POST /admin/smuggler/export-dir does.
func (s *Studio) serverSmugglerExport(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return redirectFlash(c, "/studio/smuggler", "The form could not be read: "+err.Error(), true)
	}
	dir := strings.TrimSpace(form.Get("dir"))
	path, err := smuggler.DumpPath(s.DumpDir, dir)
	if err != nil {
		return redirectFlash(c, "/studio/smuggler", err.Error(), true)
	}
	if len(form["db"]) == 0 {
		return redirectFlash(c, "/studio/smuggler", "Nothing exported: tick at least one database.", true)
	}
	o, err := serverOptions(form["type"])
	if err != nil {
		return redirectFlash(c, "/studio/smuggler", err.Error(), true)
	}
	var dbs []*storage.DB
	for _, n := range form["db"] {
		db, err := s.Catalog.Get(n)
		if err != nil {
			return redirectFlash(c, "/studio/smuggler", err.Error(), true)
		}
		dbs = append(dbs, db)
	}
	if s.Operations == nil || s.Smuggler == nil {
		return redirectFlash(c, "/studio/smuggler", "Exports are not available on this node.", true)
	}
	id, err := smuggler.StartExportDir(s.Operations, dbs, s.Smuggler, o, path, orDumpDir(dir))
	if err != nil {
		return redirectFlash(c, "/studio/smuggler", err.Error(), true)
	}
	return redirectFlash(c, serverBack(dir, id), fmt.Sprintf("Export %d started: %d databases to %s.", id, len(dbs), orDumpDir(dir)), false)
}

func orDumpDir(dir string) string {
	if dir == "" {
		return "the dump directory"
	}
	return dir
}

// serverSmugglerImport imports the ticked dumps of a directory, each into
// the database of its name (created on this node when missing), as POST
// /admin/smuggler/import-dir does.
func (s *Studio) serverSmugglerImport(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return redirectFlash(c, "/studio/smuggler", "The form could not be read: "+err.Error(), true)
	}
	dir := strings.TrimSpace(form.Get("dir"))
	back := string(views.ServerSmugglerURL(dir))
	path, err := smuggler.DumpPath(s.DumpDir, dir)
	if err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	files, err := smuggler.DirEntries(path)
	if err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	chosen := map[string]string{}
	for _, n := range form["db"] {
		f, ok := files[n]
		if !ok {
			return redirectFlash(c, back, fmt.Sprintf("There is no %s%s in %s.", n, smuggler.Ext, orDumpDir(dir)), true)
		}
		chosen[n] = f
	}
	if len(chosen) == 0 {
		return redirectFlash(c, back, "Nothing imported: tick at least one dump.", true)
	}
	if s.Operations == nil || s.Smuggler == nil {
		return redirectFlash(c, back, "Imports are not available on this node.", true)
	}
	o, _ := smuggler.ParseOptions(nil)
	lim := dump.Limits{}
	if s.MaxDocumentSize > 0 {
		lim.MaxItem = int(min(s.MaxDocumentSize+1<<20, 1<<30))
	}
	open := func(name string) (*storage.DB, error) {
		if db, err := s.Catalog.Get(name); err == nil {
			return db, nil
		}
		members := []string{s.NodeTag}
		if s.Cluster != nil {
			members = s.Cluster.MembersFor(s.NodeTag, 1)
		}
		if err := s.Catalog.CreateInCluster(context.Background(), s.Cluster, cluster.Database{Name: name, Members: members}, s.NodeTag); err != nil {
			return nil, err
		}
		return s.Catalog.Get(name)
	}
	id, err := smuggler.StartImportDir(s.Operations, chosen, open, s.Smuggler, o, lim, orDumpDir(dir))
	if err != nil {
		return redirectFlash(c, back, err.Error(), true)
	}
	return redirectFlash(c, serverBack(dir, id), fmt.Sprintf("Import %d started: %d dumps from %s.", id, len(chosen), orDumpDir(dir)), false)
}
