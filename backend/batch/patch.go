package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/jsguard"
	"github.com/rookerydb/rookery/backend/patch"
	"github.com/rookerydb/rookery/backend/storage"
)

// Patch is the command type of a JavaScript patch of one document.
const Patch = "PATCH"

// Patch statuses, as RavenDB's clients read them.
const (
	PatchStatusPatched          = "Patched"
	PatchStatusNotModified      = "NotModified"
	PatchStatusCreated          = "Created"
	PatchStatusSkipped          = "Skipped"
	PatchStatusDoesNotExist     = "DocumentDoesNotExist"
	maxPatchValuesBytes         = 16 << 20
	patchMetadataForMissingDocs = `{"@metadata":{"@id":%s}}`
)

// PatchRequest is a script with its arguments (RavenDB's PatchRequest).
type PatchRequest struct {
	Script string         `json:"Script"`
	Values map[string]any `json:"Values"`
}

// PatchSpec is what a PATCH command asks besides its id and change vector.
type PatchSpec struct {
	Patch *PatchRequest
	// PatchIfMissing runs against a new, empty document when the id does
	// not exist; CreateIfMissing is stored as it is instead (the
	// session's addOrPatch and addOrIncrement).
	PatchIfMissing  *PatchRequest
	CreateIfMissing *document.Parsed
	// ReturnDocument asks for the patched document in the result.
	ReturnDocument bool
	// SkipIfChangeVectorMismatch turns a mismatching change vector into
	// the Skipped status instead of a concurrency error.
	SkipIfChangeVectorMismatch bool
	// Debug collects the scripts' output() lines and actions; it also
	// returns the original document.
	Debug bool
}

// PatchResult is the outcome of a PATCH command.
type PatchResult struct {
	Status string
	// Modified and Original are the documents (JSON with @metadata) after
	// and before the patch, when asked for.
	Modified []byte
	Original []byte
	Debug    *PatchDebug
}

// PatchDebug is the debug output of a patch (RavenDB's Debug).
type PatchDebug struct {
	Info    []string      `json:"Info"`
	Actions patch.Actions `json:"Actions"`
}

// Options tune Execute.
type Options struct {
	// PatchTimeLimit is the time the patch scripts of one request share
	// (patch.DefaultTimeLimit when zero).
	PatchTimeLimit time.Duration
	// DryRun runs the batch and rolls it back (PATCH /docs?test=true).
	DryRun bool
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// readPatchRequest reads {"Script": "...", "Values": {...}} (null: nil).
func readPatchRequest(dec *jsontext.Decoder, field string, i int) (*PatchRequest, error) {
	if dec.PeekKind() == 'n' {
		if _, err := dec.ReadToken(); err != nil {
			return nil, bad(dec, err)
		}
		return nil, nil
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return nil, bad(dec, err)
	}
	return ParsePatchRequest(raw, fmt.Sprintf("command %d: %s", i, field))
}

// ParsePatchRequest decodes a PatchRequest, bounded in depth and size.
func ParsePatchRequest(raw []byte, what string) (*PatchRequest, error) {
	if len(raw) > maxPatchValuesBytes {
		return nil, dberr.New(dberr.TooLarge, "%s is larger than %d bytes", what, maxPatchValuesBytes)
	}
	if err := document.CheckDepth(raw); err != nil {
		return nil, dberr.New(dberr.BadRequest, "%s: %v", what, err)
	}
	if strings.TrimSpace(string(raw)) == "null" {
		return nil, nil
	}
	var p PatchRequest
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, dberr.New(dberr.BadRequest, "%s must be an object {Script, Values}: %v", what, err)
	}
	if strings.TrimSpace(p.Script) == "" {
		return nil, dberr.New(dberr.BadRequest, "%s has no Script", what)
	}
	if err := jsguard.Check(what+" script", p.Script, jsguard.DefaultMaxBytes, jsguard.DefaultMaxDepth); err != nil {
		return nil, dberr.New(dberr.BadRequest, "%v", err)
	}
	return &p, nil
}

// compiled are the scripts of one request, each compiled once.
type compiled map[string]*patch.Script

// maxCachedScripts bounds the compiled scripts kept between requests (a
// session's increments send the same script again and again; RavenDB keeps
// 2,048).
const maxCachedScripts = 512

type scriptKey struct {
	script string
	limit  time.Duration
}

var scriptCache = struct {
	sync.Mutex
	m map[scriptKey]*patch.Script
}{m: map[scriptKey]*patch.Script{}}

func (cs compiled) get(script string, limit time.Duration) (*patch.Script, error) {
	if s, ok := cs[script]; ok {
		return s, nil
	}
	key := scriptKey{script, limit}
	scriptCache.Lock()
	s, ok := scriptCache.m[key]
	scriptCache.Unlock()
	if !ok {
		var err error
		if s, err = patch.Compile(script, ""); err != nil {
			return nil, err
		}
		s.TimeLimit = limit
		scriptCache.Lock()
		if len(scriptCache.m) >= maxCachedScripts {
			// Crude but bounded: start over rather than track recency.
			clear(scriptCache.m)
		}
		scriptCache.m[key] = s
		scriptCache.Unlock()
	}
	cs[script] = s
	return s, nil
}

// compilePatches compiles every script of the batch before anything runs,
// so a script that does not compile fails the batch at once.
func compilePatches(cmds []Command, limit time.Duration) (compiled, error) {
	cs := compiled{}
	for i, c := range cmds {
		if c.Type != Patch || c.Patch == nil {
			continue
		}
		for _, r := range []*PatchRequest{c.Patch.Patch, c.Patch.PatchIfMissing} {
			if r == nil {
				continue
			}
			if _, err := cs.get(r.Script, limit); err != nil {
				if pe, ok := err.(*patch.Error); ok {
					pe.Msg = fmt.Sprintf("command %d (%s): %s", i, c.ID, pe.Msg)
				}
				return nil, err
			}
		}
	}
	return cs, nil
}

// runPatch applies one PATCH command inside the batch's transaction.
func runPatch(tx *storage.Tx, c Command, cs compiled, limit time.Duration, deadline time.Time) (Result, error) {
	spec := c.Patch
	res := Result{Type: Patch, ID: c.ID, Patch: &PatchResult{}}
	if err := storage.ValidateID(c.ID); err != nil {
		return res, err
	}
	cur, err := tx.Get(c.ID)
	if err != nil {
		return res, err
	}
	if cv := c.ChangeVector; cv != nil && *cv != "" && (cur == nil || cur.ChangeVector != *cv) {
		if spec.SkipIfChangeVectorMismatch {
			res.Patch.Status = PatchStatusSkipped
			if cur != nil {
				res.ChangeVector, res.Collection, res.LastModified = cur.ChangeVector, cur.Collection, cur.LastModified
			}
			return res, nil
		}
		if cur == nil {
			return res, dberr.New(dberr.Concurrency, "Could not patch document '%s' because it does not exist, but the patch expected change vector %s", c.ID, *cv)
		}
		return res, dberr.New(dberr.Concurrency, "Could not patch document '%s' because its change vector is %s, but the patch expected %s", cur.ID, cur.ChangeVector, *cv)
	}
	if cur == nil {
		// A conflicted id has no document, but patching "nothing" would
		// hide the conflict: RavenDB refuses it.
		conflicted, err := tx.InConflict(c.ID)
		if err != nil {
			return res, err
		}
		if conflicted {
			e := dberr.New(dberr.DocumentConflict, "Conflict detected on '%s': its versions must be resolved before it can be patched.", c.ID)
			e.DocID = c.ID
			return res, e
		}
	}
	var dbg *PatchDebug
	env := patch.Env{Deadline: deadline}
	if spec.Debug {
		dbg = &PatchDebug{Info: []string{}}
		env.Output = func(s string) { dbg.Info = append(dbg.Info, s) }
		env.Actions = &dbg.Actions
	}
	env.Load = func(id string) ([]byte, error) {
		d, err := tx.Get(id)
		if err != nil || d == nil {
			return nil, err
		}
		return d.AppendJSON(nil), nil
	}
	env.Put = func(id string, doc []byte, cv *string) (string, error) {
		if strings.HasSuffix(id, "|") {
			return "", dberr.New(dberr.BadRequest, "put(): identity ids ('%s') are not supported in patches", id)
		}
		parsed, err := document.Parse(doc)
		if err != nil {
			return "", dberr.New(dberr.BadRequest, "put('%s'): %v", id, err)
		}
		info, err := tx.Put(id, parsed, cv)
		return info.ID, err
	}
	env.Delete = func(id string, cv *string) (bool, error) {
		_, deleted, err := tx.Delete(id, cv)
		return deleted, err
	}

	var req *PatchRequest
	var src []byte
	status := PatchStatusPatched
	switch {
	case cur != nil:
		req, src = spec.Patch, cur.AppendJSON(nil)
	case spec.CreateIfMissing != nil:
		info, err := tx.Put(c.ID, *spec.CreateIfMissing, nil)
		if err != nil {
			return res, err
		}
		return finishPatch(tx, res, PatchStatusCreated, info, spec, nil, dbg)
	case spec.PatchIfMissing != nil:
		idJSON, _ := json.Marshal(c.ID)
		req, src, status = spec.PatchIfMissing, []byte(fmt.Sprintf(patchMetadataForMissingDocs, idJSON)), PatchStatusCreated
	default:
		res.Patch.Status = PatchStatusDoesNotExist
		return res, nil
	}
	script, err := cs.get(req.Script, limit)
	if err != nil {
		return res, err
	}
	env.Args = req.Values
	out, changed, err := script.Run(src, env)
	if err != nil {
		if pe, ok := err.(*patch.Error); ok {
			pe.Msg = fmt.Sprintf("patching %s: %s", c.ID, pe.Msg)
		}
		return res, err
	}
	if cur != nil && !changed {
		res.ChangeVector, res.Collection, res.LastModified = cur.ChangeVector, cur.Collection, cur.LastModified
		res.Patch.Status = PatchStatusNotModified
		if spec.ReturnDocument || spec.Debug {
			res.Patch.Modified = src
		}
		if spec.Debug {
			res.Patch.Original = src
		}
		res.Patch.Debug = dbg
		return res, nil
	}
	parsed, err := document.Parse(out)
	if err != nil {
		return res, dberr.New(dberr.BadRequest, "the patched %s is not a document: %v", c.ID, err)
	}
	info, err := tx.Put(c.ID, parsed, nil)
	if err != nil {
		return res, err
	}
	var orig []byte
	if cur != nil && spec.Debug {
		orig = src
	}
	return finishPatch(tx, res, status, info, spec, orig, dbg)
}

func finishPatch(tx *storage.Tx, res Result, status string, info storage.Info, spec *PatchSpec, orig []byte, dbg *PatchDebug) (Result, error) {
	res.ID, res.ChangeVector, res.Collection, res.LastModified = info.ID, info.ChangeVector, info.Collection, info.LastModified
	res.Patch.Status = status
	res.Patch.Original = orig
	res.Patch.Debug = dbg
	if spec.ReturnDocument || spec.Debug {
		d, err := tx.Get(info.ID)
		if err != nil {
			return res, err
		}
		if d != nil {
			res.Patch.Modified = d.AppendJSON(nil)
		}
	}
	return res, nil
}

// readPatchField reads a PATCH command's Patch, PatchIfMissing,
// CreateIfMissing or ReturnDocument.
func readPatchField(dec *jsontext.Decoder, g *docGuard, c *Command, name string, i int) error {
	if c.Patch == nil {
		c.Patch = &PatchSpec{}
	}
	switch name {
	case "Patch", "PatchIfMissing":
		r, err := readPatchRequest(dec, name, i)
		if err != nil {
			return err
		}
		if name == "Patch" {
			c.Patch.Patch = r
		} else {
			c.Patch.PatchIfMissing = r
		}
	case "ReturnDocument":
		tok, err := dec.ReadToken()
		if err != nil {
			return bad(dec, err)
		}
		c.Patch.ReturnDocument = tok.Kind() == 't'
	case "CreateIfMissing":
		if dec.PeekKind() == 'n' {
			_, err := dec.ReadToken()
			if err != nil {
				return bad(dec, err)
			}
			return nil
		}
		g.start = dec.InputOffset()
		doc, err := document.ReadMax(dec, g.max)
		g.start = -1
		if g.tripped > 0 {
			return &dberr.Error{Kind: dberr.TooLarge, Msg: fmt.Sprintf("command %d: CreateIfMissing is larger than %d bytes", i, g.max), Err: &document.SizeError{Size: g.tripped, Max: g.max}}
		}
		if err != nil {
			var se *document.SizeError
			if errors.As(err, &se) {
				return &dberr.Error{Kind: dberr.TooLarge, Msg: fmt.Sprintf("command %d: CreateIfMissing is larger than %d bytes", i, se.Max), Err: se}
			}
			return dberr.New(dberr.BadRequest, "command %d: CreateIfMissing: %v", i, err)
		}
		c.Patch.CreateIfMissing = &doc
	}
	return nil
}
