package smuggler

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
)

// Commands are the export command lines the studio offers to copy: the same
// export as the page's form, run from a shell or from cron.
type Commands struct {
	Bash       string
	PowerShell string
	// Cron is a crontab line running the Bash command every night at 02:00
	// into a file named by the date.
	Cron string
}

// CommandOptions are what the command lines need beyond the options.
type CommandOptions struct {
	ServerURL string // the node's public URL
	Database  string
	FileName  string // without .ravendbdump; a default name when empty
	// Secured adds the client certificate and CA flags (curl reads a PEM
	// holding the certificate and its key with --cert).
	Secured  bool
	CertFile string // default admin.pem
	CAFile   string // default ca.pem
}

// ExportCommands builds the command lines for an export with options o:
// curl posting DownloadOptions as RavenDB's studio generates it, which the
// export endpoint takes as the form body it is.
func ExportCommands(c CommandOptions, o Options) Commands {
	dto := map[string]any{}
	if o.OperateOnTypes != "" {
		dto["OperateOnTypes"] = o.OperateOnTypes
	}
	if len(o.Collections) > 0 {
		dto["Collections"] = o.Collections
	}
	if o.IncludeExpired != nil {
		dto["IncludeExpired"] = *o.IncludeExpired
	}
	if strings.TrimSpace(o.TransformScript) != "" {
		dto["TransformScript"] = o.TransformScript
	}
	if o.MaxStepsForTransformScript > 0 && o.MaxStepsForTransformScript != DefaultMaxSteps {
		dto["MaxStepsForTransformScript"] = o.MaxStepsForTransformScript
	}
	if strings.EqualFold(o.CompressionAlgorithm, "zstd") {
		dto["CompressionAlgorithm"] = "Zstd"
	}
	js, _ := json.Marshal(dto)
	name := c.FileName
	if name == "" {
		name = "Dump of " + c.Database
	}
	name = strings.TrimSuffix(name, Ext) + Ext
	endpoint := strings.TrimRight(c.ServerURL, "/") + "/databases/" + url.PathEscape(c.Database) + "/smuggler/export"
	cert, ca := orDefault(c.CertFile, "admin.pem"), orDefault(c.CAFile, "ca.pem")
	tls := ""
	if c.Secured {
		tls = " --cert " + shQuote(cert) + " --cacert " + shQuote(ca)
	}
	bash := "curl -sS --fail" + tls + " -o " + shQuote(name) + " --data DownloadOptions=" + shQuote(string(js)) + " " + shQuote(endpoint)
	psTLS := ""
	if c.Secured {
		psTLS = " --cert " + psQuote(cert) + " --cacert " + psQuote(ca)
	}
	// PowerShell passes a native command's arguments with their inner
	// double quotes stripped unless escaped as \".
	ps := "curl.exe -sS --fail" + psTLS + " -o " + psQuote(name) + " --data " + psQuote("DownloadOptions="+strings.ReplaceAll(string(js), `"`, `\"`)) + " " + psQuote(endpoint)
	// In a crontab line % ends the command unless escaped.
	// A name ending in the studio's date stamp ("Dump of shop 2026-01-02
	// 15-04") takes the day of each run instead.
	dated := dateStamp.ReplaceAllString(strings.TrimSuffix(name, Ext), "") + " $(date +%F)" + Ext
	cronCmd := "curl -sS --fail" + tls + " -o \"" + strings.ReplaceAll(dated, `"`, `\"`) + "\" --data DownloadOptions=" + shQuote(string(js)) + " " + shQuote(endpoint)
	cron := "0 2 * * * " + strings.ReplaceAll(cronCmd, "%", `\%`)
	return Commands{Bash: bash, PowerShell: ps, Cron: cron}
}

// dateStamp is the date (and time) the studio's default file name ends in.
var dateStamp = regexp.MustCompile(` \d{4}-\d{2}-\d{2}( \d{2}-\d{2})?$`)

// shQuote quotes s for a POSIX shell: single quotes, with each ' as '"'"'.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

// psQuote quotes s for PowerShell: single quotes, with each ' doubled.
func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
