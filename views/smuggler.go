package views

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// SmugglerType is an item type the Import/Export pages offer.
type SmugglerType struct {
	Name  string // RavenDB's DatabaseItemType name
	Label string
	Note  string
}

// SmugglerTypes are the item types Rookery exports and imports, in the
// order of RavenDB's studio.
var SmugglerTypes = []SmugglerType{
	{Name: "Documents", Label: "Documents", Note: "with their metadata and change vectors, HiLo documents included"},
	{Name: "RevisionDocuments", Label: "Revisions", Note: "every kept revision, conflict and resolution revisions included"},
	{Name: "Conflicts", Label: "Conflicts", Note: "every stored version of a conflicted id"},
	{Name: "Indexes", Label: "Indexes", Note: "definitions: static and auto indexes"},
	{Name: "Identities", Label: "Identities", Note: "identity counters (orders|)"},
	{Name: "CompareExchange", Label: "Compare exchange", Note: "the cluster-wide keys and values of this database"},
	{Name: "CounterGroups", Label: "Counters", Note: "each document's counters, with every node's part"},
	{Name: "Subscriptions", Label: "Subscriptions", Note: "with where each one stands"},
	{Name: "Attachments", Label: "Attachments", Note: "the content of the documents' attachments (with Documents)"},
	{Name: "TimeSeries", Label: "Time series", Note: "every series' entries (with Documents)"},
	{Name: "DatabaseRecord", Label: "Database record", Note: "the database's configuration"},
}

// DefaultTransformScript pre-fills the transform script: what a script
// sees and how it drops a document.
const DefaultTransformScript = `// Runs once per document: "this" is the document, its metadata in
// this['@metadata'] (@collection is there; @id, @change-vector and
// @last-modified are not available to the script).
// Change fields, or drop the document with: throw 'skip';
// this.collection = this['@metadata']['@collection'];
`

// ExportForm is the export's options as the page shows them (from its
// query, or the defaults).
type ExportForm struct {
	Database       string
	Types          map[string]bool
	Collections    []string        // the database's collections
	Chosen         map[string]bool // the chosen ones; none chosen is all
	IncludeExpired bool
	Compression    string // "Gzip" or "Zstd"
	FileName       string
	Transform      bool
	Script         string
	// Secured: the commands present a client certificate (CertFile, a PEM
	// with the key, as `studio setup` writes admin.pem) and trust CAFile.
	Secured          bool
	CertFile, CAFile string
}

// ExportCommand is what the options make: the form's DownloadOptions and
// the three command lines.
type ExportCommand struct {
	DownloadOptions        string
	Bash, PowerShell, Cron string
	Secured                bool
	CertFile, CAFile       string
	// Problem is why an export with these options would be refused (a
	// transform script that does not compile, no item type); "" when fine.
	Problem string
}

// ImportForm is the import's options.
type ImportForm struct {
	Database string
	// Defaults is the importOptions JSON a browser without JavaScript
	// sends (the page's script sends the options chosen).
	Defaults string
	Script   string
}

// SmugglerRow is one item type's counts in a result.
type SmugglerRow struct {
	Type                   string
	Read, Skipped, Errored int64
	// Attachments are the attachment streams met (documents only).
	Attachments int64
	// NotStored: Rookery reads and counts this type but does not store it
	// yet (counters, time series, revisions...).
	NotStored bool
}

// SmugglerMessage is one line of a result's messages.
type SmugglerMessage struct {
	Time, Level, Text string
}

// SmugglerPart is one database of a server-wide export or import.
type SmugglerPart struct {
	Name     string
	State    string // running, completed, failed, waiting
	Error    string
	Done     int64
	Total    int64
	Rows     []SmugglerRow
	Messages []SmugglerMessage
}

// SmugglerOp is an import or export as its page shows it.
type SmugglerOp struct {
	ID          int64
	Database    string // "" for a server-wide one
	Kind        string // "Export", "Import", "Server export", "Server import"
	Description string
	State       string // running, completed, failed, cancelled
	Started     time.Time
	Elapsed     string
	// Done of Total in Unit ("bytes" of the dump read, "etags" scanned);
	// Total 0 when unknown.
	Done, Total int64
	Unit        string
	Rows        []SmugglerRow
	Messages    []SmugglerMessage
	Error       string
	Parts       []SmugglerPart
	Killable    bool
}

// Percent is how far the operation is, 0–100 (100 once completed).
func (o SmugglerOp) Percent() int { return percent(o.State, o.Done, o.Total) }

// Known tells whether the operation's extent is known (a determinate bar).
func (o SmugglerOp) Known() bool { return o.State != "running" || o.Total > 0 }

// Percent is how far a database's part is.
func (p SmugglerPart) Percent() int { return percent(p.State, p.Done, p.Total) }

func percent(state string, done, total int64) int {
	if state == "completed" {
		return 100
	}
	if total <= 0 {
		return 0
	}
	return int(min(done*100/total, 100))
}

// Documents is the number of documents a result counts.
func (o SmugglerOp) Documents() int64 { return rowRead(o.Rows, "Documents") }

func rowRead(rows []SmugglerRow, t string) int64 {
	for _, r := range rows {
		if r.Type == t {
			return r.Read
		}
	}
	return 0
}

// Warnings counts the WARN and ERROR messages.
func (o SmugglerOp) Warnings() int {
	n := 0
	for _, m := range o.Messages {
		if m.Level == "WARN" || m.Level == "ERROR" {
			n++
		}
	}
	return n
}

// SmugglerPage is a database's Import/Export page.
type SmugglerPage struct {
	Database string
	Export   ExportForm
	Command  ExportCommand
	Import   ImportForm
	Ops      []SmugglerOp
}

// DumpFile is one dump of a server-side directory.
type DumpFile struct {
	Name     string // the database it holds (the file name without .ravendbdump)
	Size     int64
	Modified time.Time
}

// ServerSmugglerPage is the server's Import/Export page (several
// databases at once, to and from --dump-dir).
type ServerSmugglerPage struct {
	// Root is the server's dump directory (--dump-dir), Dir the chosen
	// directory below it ("" for Root itself), Dirs Root's subdirectories.
	Root      string
	Dir       string
	Dirs      []string
	Dumps     []DumpFile
	DirError  string
	Databases []string
	// ExportDir is the directory the export form proposes.
	ExportDir string
	Types     map[string]bool
	Ops       []SmugglerOp
}

// RunningOp is a running operation in the header's notification area.
type RunningOp struct {
	ID       int64
	Label    string // "Import into shop"
	Percent  int
	Known    bool // Percent is known
	Figures  string
	Link     string // its page; "" when it has none
	Database string
}

// RunningOpsLabel is the notification area's summary.
func RunningOpsLabel(n int) string {
	return plural(n, "1 operation running", strconv.Itoa(n)+" operations running")
}

// SmugglerURL is a database's Import/Export page, at an operation.
func SmugglerURL(db string, op int64) templ.SafeURL {
	u := "/studio/db/" + url.PathEscape(db) + "/smuggler"
	if op > 0 {
		u += "#op-" + strconv.FormatInt(op, 10)
	}
	return templ.SafeURL(u)
}

// ServerSmugglerURL is the server's Import/Export page for directory dir.
func ServerSmugglerURL(dir string) templ.SafeURL {
	if dir == "" {
		return "/studio/smuggler"
	}
	return templ.SafeURL("/studio/smuggler?" + url.Values{"dir": {dir}}.Encode())
}

// ExportAction is the export form's target (the API's export endpoint;
// the page's script adds an operationId).
func ExportAction(db string) templ.SafeURL {
	return templ.SafeURL("/databases/" + url.PathEscape(db) + "/smuggler/export")
}

// ImportAction is the import form's target.
func ImportAction(db string) templ.SafeURL {
	return templ.SafeURL("/databases/" + url.PathEscape(db) + "/smuggler/import")
}

func opPos(o SmugglerOp) string {
	if o.Total <= 0 {
		return ""
	}
	switch o.Unit {
	case "bytes":
		return Bytes(o.Done) + " of " + Bytes(o.Total)
	case "etags":
		return "etag " + Num(o.Done) + " of " + Num(o.Total)
	}
	return ""
}

func levelCls(level string) string {
	switch level {
	case "WARN":
		return "msg-warn"
	case "ERROR":
		return "msg-error"
	}
	return "msg-info"
}

func smugStateLabel(s string) string {
	switch s {
	case "completed":
		return "done"
	case "failed":
		return "failed"
	case "cancelled":
		return "cancelled"
	case "waiting":
		return "waiting"
	}
	return "running"
}

func smugStateClass(s string) string {
	switch s {
	case "completed":
		return "op-done"
	case "failed":
		return "op-failed"
	case "cancelled":
		return "op-cancelled"
	case "waiting":
		return ""
	}
	return "op-running"
}

func id64(n int64) string { return strconv.FormatInt(n, 10) }

func typeID(prefix, name string) string { return prefix + "-" + strings.ToLower(name) }

// typeLabels name the item types for people.
var typeLabels = map[string]string{"DatabaseRecord": "Database record", "RevisionDocuments": "Revisions",
	"CompareExchange": "Compare exchange", "TimeSeries": "Time series"}

// TypeLabel names an item type for people ("DatabaseRecord": "Database record").
func TypeLabel(t string) string {
	if l, ok := typeLabels[t]; ok {
		return l
	}
	return t
}

func dirLabel(dir string) string {
	if dir == "" {
		return "the dump directory"
	}
	return dir
}

// partSummary is a database part's other counts in one line
// ("2 indexes · 1 identity").
func partSummary(p SmugglerPart) string {
	var out []string
	for _, r := range p.Rows {
		if r.Type == "Documents" || r.Read == 0 {
			continue
		}
		out = append(out, Num(r.Read)+" "+strings.ToLower(TypeLabel(r.Type)))
	}
	w := 0
	for _, m := range p.Messages {
		if m.Level == "WARN" || m.Level == "ERROR" {
			w++
		}
	}
	if w > 0 {
		out = append(out, plural(w, "1 warning", strconv.Itoa(w)+" warnings"))
	}
	return strings.Join(out, " · ")
}
