// Package batch reads a bulk_docs request (the session's SaveChanges) and
// runs it as one all-or-nothing transaction.
package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/changevector"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/storage"
)

// Command types.
const (
	Put    = "PUT"
	Delete = "DELETE"
	// AttachmentPut and AttachmentDelete: see attachments.go.
	AttachmentPut    = "AttachmentPUT"
	AttachmentDelete = "AttachmentDELETE"
	// ForceRevision makes a revision of the document as it is
	// (session.advanced.revisions.forceRevisionCreationFor).
	ForceRevision = "ForceRevisionCreation"
)

// Command is one command of a batch.
type Command struct {
	Type string
	ID   string
	// ChangeVector is the optimistic-concurrency expectation: nil for no
	// check, "" for "must be new", otherwise the exact current vector.
	ChangeVector *string
	Document     document.Parsed
	hasDocument  bool
	// Name and ContentType of an attachment command; Attachment is the
	// staged content of an AttachmentPUT (the request's matching part).
	Name, ContentType string
	Attachment        *storage.Staged
	// Patch is a PATCH command's script and options (see patch.go).
	Patch *PatchSpec
	// Index is a compare-exchange command's expected index, and
	// OriginalChangeVector the vector the session loaded (a cluster-wide
	// transaction's atomic guard); see cmpxchg.go.
	Index                int64
	OriginalChangeVector *string
	// TimeSeries is a TimeSeries command's changes (timeseries.go).
	TimeSeries *storage.TSOp
	// Counters is a Counters command's operations (counters.go).
	Counters *CounterOps
}

// MaxCommands bounds the commands of one batch.
const MaxCommands = 1 << 20

func badf(offset int64, format string, args ...any) error {
	return dberr.New(dberr.BadRequest, "Invalid batch request at byte %d: %s", offset, fmt.Sprintf(format, args...))
}

// bad describes a decoding error at the decoder's position; nesting past
// jsontext's own ceiling (in a field Rookery skips) is told as the depth
// limit it is.
func bad(dec *jsontext.Decoder, err error) error {
	if d := document.TooDeep(err); d != nil {
		return dberr.New(dberr.BadRequest, "Invalid batch request: %v", d)
	}
	return badf(dec.InputOffset(), "%v", err)
}

// Parse reads a batch body, {"Commands":[...]}, in one pass: each document
// is split into its stored form as it is read.
func Parse(r io.Reader) ([]Command, error) { return ParseMax(r, 0) }

// ParseMax is Parse with a limit on each document's size (see
// document.ReadMax): a larger one fails the batch with a dberr.TooLarge
// whose cause is the *document.SizeError.
func ParseMax(r io.Reader, maxDocument int64) ([]Command, error) {
	cmds, clusterWide, err := ParseMaxMode(r, maxDocument)
	if err == nil && clusterWide {
		return nil, dberr.New(dberr.BadRequest, "Cluster-wide transactions are not supported here")
	}
	return cmds, err
}

// ParseMaxMode is ParseMax that also tells whether the batch asked for a
// cluster-wide transaction (TransactionMode "ClusterWide"); compare-exchange
// commands are accepted only in one.
func ParseMaxMode(r io.Reader, maxDocument int64) (cmds []Command, clusterWide bool, err error) {
	cmds, clusterWide, err = parseMax(r, maxDocument)
	if err == nil {
		err = checkMode(cmds, clusterWide)
	}
	return cmds, clusterWide, err
}

func parseMax(r io.Reader, maxDocument int64) ([]Command, bool, error) {
	clusterWide := false
	cmds, err := parseBody(r, maxDocument, &clusterWide)
	return cmds, clusterWide, err
}

func parseBody(r io.Reader, maxDocument int64, clusterWide *bool) ([]Command, error) {
	g := &docGuard{r: r, max: maxDocument, start: -1}
	dec := jsontext.NewDecoder(g)
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, bad(dec, err)
	}
	if tok.Kind() != '{' {
		return nil, badf(dec.InputOffset(), "the body must be a JSON object with a Commands array")
	}
	var cmds []Command
	seen := false
	for dec.PeekKind() != '}' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return nil, bad(dec, err)
		}
		switch nameTok.String() {
		case "Commands":
			seen = true
			if cmds, err = readCommands(dec, g); err != nil {
				return nil, err
			}
		case "TransactionMode":
			v, err := dec.ReadToken()
			if err != nil {
				return nil, bad(dec, err)
			}
			*clusterWide = v.Kind() == '"' && v.String() == "ClusterWide"
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, bad(dec, err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, bad(dec, err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, badf(dec.InputOffset(), "unexpected data after the JSON object")
	}
	if !seen {
		return nil, dberr.New(dberr.BadRequest, "Invalid batch request: the Commands array is missing")
	}
	return cmds, nil
}

// docGuard stops reading a batch as soon as the document being read is
// known to be over the limit: the decoder fetches more input only to finish
// the current value, so every byte between the document's start and what
// was read so far belongs to it. Without it, a single huge member would be
// buffered whole (up to the request-body limit) before ReadMax could count
// it.
type docGuard struct {
	r       io.Reader
	read    int64 // bytes handed to the decoder
	max     int64 // the document limit; none when <= 0
	start   int64 // offset where the current document starts; -1 outside one
	tripped int64 // the document's size so far when the guard stopped it
}

var errDocumentTooLarge = errors.New("document over the size limit")

func (g *docGuard) Read(p []byte) (int, error) {
	if g.max > 0 && g.start >= 0 && g.read-g.start > g.max {
		g.tripped = g.read - g.start
		return 0, errDocumentTooLarge
	}
	n, err := g.r.Read(p)
	g.read += int64(n)
	return n, err
}

func readCommands(dec *jsontext.Decoder, g *docGuard) ([]Command, error) {
	if k := dec.PeekKind(); k != '[' {
		if k == 'n' {
			if _, err := dec.ReadToken(); err != nil {
				return nil, bad(dec, err)
			}
			return nil, nil
		}
		return nil, badf(dec.InputOffset(), "Commands must be an array")
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, bad(dec, err)
	}
	var cmds []Command
	for dec.PeekKind() != ']' {
		if len(cmds) >= MaxCommands {
			return nil, badf(dec.InputOffset(), "more than %d commands", MaxCommands)
		}
		c, err := readCommand(dec, len(cmds), g)
		if err != nil {
			return nil, err
		}
		cmds = append(cmds, c)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, bad(dec, err)
	}
	return cmds, nil
}

func readString(dec *jsontext.Decoder, field string, i int) (*string, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, bad(dec, err)
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case '"':
		s := tok.String()
		return &s, nil
	}
	if tok.Kind() == '{' || tok.Kind() == '[' {
		// Consume the rest of the value so the error position is useful.
		return nil, badf(dec.InputOffset(), "command %d: %s must be a string", i, field)
	}
	return nil, badf(dec.InputOffset(), "command %d: %s must be a string, got %s", i, field, tok.String())
}

func readCommand(dec *jsontext.Decoder, i int, g *docGuard) (Command, error) {
	var c Command
	if k := dec.PeekKind(); k != '{' {
		if k == jsontext.KindInvalid {
			_, err := dec.ReadToken()
			return c, bad(dec, err)
		}
		return c, badf(dec.InputOffset(), "command %d must be an object", i)
	}
	if _, err := dec.ReadToken(); err != nil {
		return c, bad(dec, err)
	}
	idSeen := false
	for dec.PeekKind() != '}' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return c, bad(dec, err)
		}
		switch nameTok.String() {
		case "Type":
			s, err := readString(dec, "Type", i)
			if err != nil {
				return c, err
			}
			if s != nil {
				c.Type = *s
			}
		case "Id":
			s, err := readString(dec, "Id", i)
			if err != nil {
				return c, err
			}
			idSeen = true
			if s != nil {
				c.ID = *s
			}
		case "ChangeVector":
			if c.ChangeVector, err = readString(dec, "ChangeVector", i); err != nil {
				return c, err
			}
			if c.ChangeVector != nil {
				if err := changevector.CheckLength(*c.ChangeVector); err != nil {
					return c, badf(dec.InputOffset(), "command %d: ChangeVector: %v", i, err)
				}
			}
		case "Index":
			if c.Index, err = readIndex(dec, i); err != nil {
				return c, err
			}
		case "OriginalChangeVector":
			if c.OriginalChangeVector, err = readString(dec, "OriginalChangeVector", i); err != nil {
				return c, err
			}
			if c.OriginalChangeVector != nil {
				if err := changevector.CheckLength(*c.OriginalChangeVector); err != nil {
					return c, badf(dec.InputOffset(), "command %d: OriginalChangeVector: %v", i, err)
				}
			}
		case "Document":
			if dec.PeekKind() == 'n' {
				if _, err := dec.ReadToken(); err != nil {
					return c, bad(dec, err)
				}
				continue
			}
			g.start = dec.InputOffset()
			doc, err := document.ReadMax(dec, g.max)
			g.start = -1
			var se *document.SizeError
			if g.tripped > 0 {
				se = &document.SizeError{Size: g.tripped, Max: g.max}
			}
			if se != nil || errors.As(err, &se) {
				id := ""
				if idSeen {
					id = fmt.Sprintf(" (%q)", c.ID)
				}
				return c, &dberr.Error{Kind: dberr.TooLarge, Msg: fmt.Sprintf("command %d%s: the document is larger than %d bytes", i, id, se.Max), Err: se}
			}
			if err != nil {
				return c, dberr.New(dberr.BadRequest, "command %d: %v", i, err)
			}
			c.Document = doc
			c.hasDocument = true
		case "Name", "ContentType":
			field := nameTok.String()
			s, err := readString(dec, field, i)
			if err != nil {
				return c, err
			}
			if s != nil && field == "Name" {
				c.Name = *s
			} else if s != nil {
				c.ContentType = *s
			}
		case "Patch", "PatchIfMissing", "CreateIfMissing", "ReturnDocument":
			if err := readPatchField(dec, g, &c, nameTok.String(), i); err != nil {
				return c, err
			}
		case "TimeSeries":
			if c.TimeSeries, err = readTimeSeries(dec, i); err != nil {
				return c, err
			}
		case "Counters":
			if c.Counters, err = readCounterOps(dec, i); err != nil {
				return c, err
			}
		default:
			// OriginalChangeVector, ForceRevisionCreationStrategy and other
			// fields Rookery does not use.
			if err := dec.SkipValue(); err != nil {
				return c, bad(dec, err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return c, bad(dec, err)
	}
	switch c.Type {
	case Put:
		if !c.hasDocument {
			return c, dberr.New(dberr.BadRequest, "command %d: PUT requires a Document", i)
		}
	case Delete:
		if !idSeen || strings.TrimSpace(c.ID) == "" {
			return c, dberr.New(dberr.BadRequest, "command %d: DELETE requires an Id", i)
		}
	case AttachmentPut, AttachmentDelete:
		if !idSeen || strings.TrimSpace(c.ID) == "" {
			return c, dberr.New(dberr.BadRequest, "command %d: %s requires an Id", i, c.Type)
		}
		if err := storage.ValidateAttachmentName(c.Name); err != nil {
			return c, dberr.New(dberr.BadRequest, "command %d: %v", i, err)
		}
	case Patch:
		if !idSeen || strings.TrimSpace(c.ID) == "" {
			return c, dberr.New(dberr.BadRequest, "command %d: PATCH requires an Id", i)
		}
		if c.Patch == nil || c.Patch.Patch == nil {
			return c, dberr.New(dberr.BadRequest, "command %d: PATCH requires a Patch {Script, Values}", i)
		}
	case CmpXchgPut, CmpXchgDelete:
		if err := checkCmpXchg(c, i); err != nil {
			return c, err
		}
	case ForceRevision:
		if !idSeen || strings.TrimSpace(c.ID) == "" {
			return c, dberr.New(dberr.BadRequest, "command %d: ForceRevisionCreation requires an Id", i)
		}
	case TimeSeries:
		if err := checkTimeSeries(c, idSeen, i); err != nil {
			return c, err
		}
	case Counters:
		if err := checkCounterCommand(&c, idSeen, i); err != nil {
			return c, err
		}
	case "":
		return c, dberr.New(dberr.BadRequest, "command %d has no Type", i)
	default:
		return c, dberr.New(dberr.BadRequest, "command %d: command type '%s' is not supported", i, c.Type)
	}
	return c, nil
}

// Result is the outcome of one command.
type Result struct {
	Type         string
	ID           string
	Collection   string
	ChangeVector string
	LastModified time.Time
	Deleted      bool
	// Attachment is the stored attachment of an AttachmentPUT (its
	// ChangeVector is the document's new one; so is ChangeVector).
	Attachment *storage.AttachmentInfo
	// Patch is a PATCH command's outcome.
	Patch *PatchResult
	// RevisionCreated: a ForceRevisionCreation stored a new revision.
	RevisionCreated bool
	// Counters are a Counters command's counters after it ran.
	Counters []storage.Counter
}

// Identities takes identity values for a database: unique cluster-wide,
// and never one whose document exists on this node.
type Identities interface {
	TakeIdentities(ctx context.Context, db *storage.DB, prefixes []string) ([]int64, error)
}

// Execute runs the commands as one transaction: every command applies, or
// none does. Identity ids (ending in '|') are resolved first, all of them in
// one step through ident, and their documents must be new: if one appeared
// meanwhile the batch fails with a concurrency error instead of overwriting.
func Execute(ctx context.Context, db *storage.DB, ident Identities, cmds []Command) ([]Result, error) {
	return ExecuteWith(ctx, db, ident, cmds, Options{})
}

// ExecuteWith is Execute with options. PATCH commands run their scripts
// inside the same transaction: a later command's failure undoes them too.
func ExecuteWith(ctx context.Context, db *storage.DB, ident Identities, cmds []Command, o Options) ([]Result, error) {
	limit := o.PatchTimeLimit
	if limit <= 0 {
		limit = patch.DefaultTimeLimit
	}
	scripts, err := compilePatches(cmds, limit)
	if err != nil {
		return nil, err
	}
	var prefixes []string
	var at []int
	for i, c := range cmds {
		if c.Type == Put && strings.HasSuffix(c.ID, "|") {
			if c.ChangeVector != nil && *c.ChangeVector != "" {
				return nil, dberr.New(dberr.BadRequest, "Document id '%s' is an identity id: it cannot be combined with a change vector", c.ID)
			}
			prefixes = append(prefixes, c.ID)
			at = append(at, i)
		}
	}
	resolved := map[int]string{}
	if len(prefixes) > 0 {
		if ident == nil {
			return nil, dberr.New(dberr.Unavailable, "identities are not available on this node")
		}
		values, err := ident.TakeIdentities(ctx, db, prefixes)
		if err != nil {
			return nil, err
		}
		for j, v := range values {
			resolved[at[j]] = strings.TrimSuffix(prefixes[j], "|") + db.Separator() + itoa(v)
		}
	}
	var results []Result
	var deadline time.Time
	err = db.Write(ctx, func(tx *storage.Tx) error {
		results = make([]Result, len(cmds))
		if deadline.IsZero() {
			// The scripts' shared budget starts when the batch runs.
			deadline = time.Now().Add(limit)
		}
		empty := ""
		for i := 0; i < len(cmds); i++ {
			c := cmds[i]
			if j := plainPutRun(cmds, i, resolved); j-i >= minPutManyRun {
				// A long run of plain PUTs: storage.PutMany, the same
				// outcome as Put one by one, in fewer statements.
				items := make([]storage.PutItem, 0, j-i)
				for _, pc := range cmds[i:j] {
					items = append(items, storage.PutItem{ID: pc.ID, Doc: pc.Document})
				}
				infos, err := tx.PutMany(items)
				if err != nil {
					return err
				}
				for k, info := range infos {
					results[i+k] = Result{Type: Put, ID: info.ID, Collection: info.Collection, ChangeVector: info.ChangeVector, LastModified: info.LastModified}
				}
				i = j - 1
				continue
			}
			switch c.Type {
			case Put:
				id, expected := c.ID, c.ChangeVector
				if r, ok := resolved[i]; ok {
					id, expected = r, &empty
				}
				info, err := tx.Put(id, c.Document, expected)
				if err != nil {
					return err
				}
				results[i] = Result{Type: Put, ID: info.ID, Collection: info.Collection, ChangeVector: info.ChangeVector, LastModified: info.LastModified}
			case Delete:
				info, deleted, err := tx.Delete(c.ID, c.ChangeVector)
				if err != nil {
					return err
				}
				results[i] = Result{Type: Delete, ID: info.ID, ChangeVector: info.ChangeVector, Deleted: deleted}
			case AttachmentPut, AttachmentDelete:
				r, err := executeAttachment(tx, c)
				if err != nil {
					return err
				}
				results[i] = r
			case Patch:
				r, err := runPatch(tx, c, scripts, limit, deadline)
				if err != nil {
					return err
				}
				results[i] = r
			case Counters:
				r, err := execCounters(tx, c)
				if err != nil {
					return err
				}
				results[i] = r
			case ForceRevision:
				info, created, err := tx.ForceRevision(c.ID)
				if err != nil {
					return err
				}
				results[i] = Result{Type: ForceRevision, ID: info.ID, ChangeVector: info.ChangeVector, LastModified: info.LastModified, RevisionCreated: created}
			case TimeSeries:
				if err := tx.TimeSeries(c.ID, *c.TimeSeries); err != nil {
					return err
				}
				results[i] = Result{Type: TimeSeries, ID: c.ID}
			default:
				return errors.New("unreachable: unknown command type")
			}
		}
		if o.DryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !(o.DryRun && errors.Is(err, errDryRun)) {
		return nil, err
	}
	return results, nil
}

// minPutManyRun is the shortest run of plain PUTs Execute hands to
// storage.PutMany.
const minPutManyRun = 64

// plainPutRun returns the end of the run of PUTs starting at i that have no
// concurrency check and no identity id.
func plainPutRun(cmds []Command, i int, resolved map[int]string) int {
	j := i
	for j < len(cmds) {
		c := cmds[j]
		if c.Type != Put || c.ChangeVector != nil || strings.HasSuffix(c.ID, "|") {
			break
		}
		if _, ok := resolved[j]; ok {
			break
		}
		j++
	}
	return j
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
