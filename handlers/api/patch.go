package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
)

// patchBodyLimit bounds PATCH /docs's body: two scripts with their values
// and, at most, one document.
func (a *API) patchBodyLimit() int64 {
	if a.MaxDocumentSize > 0 {
		return 2*a.MaxDocumentSize + 1<<20
	}
	return 64 << 20
}

// patchDoc serves PATCH /docs?id= (PatchOperation): one document patched
// by a JavaScript script, with RavenDB's statuses: 200 Patched or
// NotModified, 201 Created (PatchIfMissing or CreateIfMissing), 304
// Skipped (skipPatchIfChangeVectorMismatch), 404 when the document does not
// exist. debug=true adds the script's output and the original document;
// test=true runs the patch and writes nothing.
func (a *API) patchDoc(c echo.Context) error {
	db, id, err := a.dbParam(c, "id")
	if err != nil {
		return err
	}
	cv, err := expectedCV(c)
	if err != nil {
		return err
	}
	skip, err := boolParam(c, "skipPatchIfChangeVectorMismatch")
	if err != nil {
		return err
	}
	debug, err := boolParam(c, "debug")
	if err != nil {
		return err
	}
	test, err := boolParam(c, "test")
	if err != nil {
		return err
	}
	body, err := readBody(c, a.patchBodyLimit(), "the patch request")
	if err != nil {
		return err
	}
	if err := document.CheckDepth(body); err != nil {
		return dberr.New(dberr.BadRequest, "the patch request: %v", err)
	}
	var in struct {
		Patch, PatchIfMissing, CreateIfMissing json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return dberr.New(dberr.BadRequest, "the patch request must be a JSON object {Patch, PatchIfMissing}: %v", err)
	}
	spec := &batch.PatchSpec{ReturnDocument: true, SkipIfChangeVectorMismatch: skip, Debug: debug}
	if len(in.Patch) > 0 {
		if spec.Patch, err = batch.ParsePatchRequest(in.Patch, "Patch"); err != nil {
			return err
		}
	}
	if spec.Patch == nil {
		return dberr.New(dberr.BadRequest, "the patch request has no Patch {Script, Values}")
	}
	if len(in.PatchIfMissing) > 0 {
		if spec.PatchIfMissing, err = batch.ParsePatchRequest(in.PatchIfMissing, "PatchIfMissing"); err != nil {
			return err
		}
	}
	if len(in.CreateIfMissing) > 0 && string(in.CreateIfMissing) != "null" {
		doc, err := document.ParseMax(in.CreateIfMissing, a.MaxDocumentSize)
		if err != nil {
			return documentError(err, id)
		}
		spec.CreateIfMissing = &doc
	}
	cmd := batch.Command{Type: batch.Patch, ID: id, ChangeVector: cv, Patch: spec}
	res, err := batch.ExecuteWith(c.Request().Context(), db, a.idents(), []batch.Command{cmd}, batch.Options{PatchTimeLimit: a.PatchTimeLimit, DryRun: test})
	if err != nil {
		return err
	}
	r := res[0]
	switch r.Patch.Status {
	case batch.PatchStatusDoesNotExist:
		return c.NoContent(http.StatusNotFound)
	case batch.PatchStatusSkipped:
		return c.NoContent(http.StatusNotModified)
	}
	status := http.StatusOK
	if r.Patch.Status == batch.PatchStatusCreated {
		status = http.StatusCreated
	}
	out := map[string]any{
		"Status":           r.Patch.Status,
		"ModifiedDocument": rawOrNull(r.Patch.Modified),
		"OriginalDocument": rawOrNull(r.Patch.Original),
		"Debug":            nil,
		"ChangeVector":     r.ChangeVector,
		"Collection":       r.Collection,
		"LastModified":     document.FormatTime(r.LastModified),
	}
	if r.Patch.Debug != nil {
		out["Debug"] = r.Patch.Debug
	}
	return writeJSON(c, status, out)
}

func rawOrNull(b []byte) json.RawMessage {
	if b == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// appendPatchResult writes a PATCH command's item of a bulk_docs reply.
func appendPatchResult(buf []byte, r batch.Result) []byte {
	buf = append(buf, `{"Type":"PATCH","Id":`...)
	buf = document.AppendString(buf, r.ID)
	buf = append(buf, `,"PatchStatus":`...)
	buf = document.AppendString(buf, r.Patch.Status)
	if r.ChangeVector != "" {
		buf = append(buf, `,"ChangeVector":`...)
		buf = document.AppendString(buf, r.ChangeVector)
		buf = append(buf, `,"LastModified":"`...)
		buf = r.LastModified.UTC().AppendFormat(buf, document.TimeFormat)
		buf = append(buf, `","@collection":`...)
		buf = document.AppendString(buf, r.Collection)
	} else {
		buf = append(buf, `,"ChangeVector":null`...)
	}
	if r.Patch.Modified != nil {
		buf = append(buf, `,"ModifiedDocument":`...)
		buf = append(buf, r.Patch.Modified...)
	}
	if r.Patch.Debug != nil {
		if b, err := json.Marshal(r.Patch.Debug); err == nil {
			buf = append(buf, `,"Debug":`...)
			buf = append(buf, b...)
		}
	}
	return append(buf, '}')
}
