package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/batch"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// DefaultMaxAttachmentSize is the largest attachment a client may store
// (--max-attachment-size).
const DefaultMaxAttachmentSize = 4 << 30

func (a *API) registerAttachments(g *echo.Group) {
	g.PUT("/attachments", a.putAttachment)
	g.GET("/attachments", a.getAttachment)
	g.POST("/attachments", a.postAttachment)
	g.HEAD("/attachments", a.headAttachment)
	g.DELETE("/attachments", a.deleteAttachment)
}

func (a *API) maxAttachment() int64 {
	if a.MaxAttachmentSize == 0 {
		return DefaultMaxAttachmentSize
	}
	return max(a.MaxAttachmentSize, 0)
}

// attachmentParams resolves the database, ?id= and ?name=.
func (a *API) attachmentParams(c echo.Context) (*storage.DB, string, string, error) {
	db, id, err := a.dbParam(c, "id")
	if err != nil {
		return nil, "", "", err
	}
	name, err := requiredParam(c, "name")
	return db, id, name, err
}

func appendAttachmentDetails(buf []byte, info *storage.AttachmentInfo) []byte {
	buf = append(buf, `{"ChangeVector":`...)
	buf = document.AppendString(buf, info.ChangeVector)
	buf = append(buf, `,"Name":`...)
	buf = document.AppendString(buf, info.Name)
	buf = append(buf, `,"DocumentId":`...)
	buf = document.AppendString(buf, info.DocumentID)
	buf = append(buf, `,"Hash":`...)
	buf = document.AppendString(buf, info.Hash)
	buf = append(buf, `,"ContentType":`...)
	buf = document.AppendString(buf, info.ContentType)
	buf = append(buf, `,"Size":`...)
	buf = strconv.AppendInt(buf, info.Size, 10)
	return append(buf, '}')
}

// putAttachment serves PUT /attachments?id=&name=[&contentType=]: the body
// is the content, staged to a file beside the database before the write is
// queued (bounded by --max-attachment-size, never held in memory).
func (a *API) putAttachment(c echo.Context) error {
	db, id, name, err := a.attachmentParams(c)
	if err != nil {
		return err
	}
	if err := storage.ValidateAttachmentName(name); err != nil {
		return err
	}
	cv, err := expectedCV(c)
	if err != nil {
		return err
	}
	st, err := db.StageAttachment(c.Request().Body, a.maxAttachment())
	if err != nil {
		return err
	}
	defer st.Remove()
	var info storage.AttachmentInfo
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("api")
		var err error
		info, err = tx.PutAttachment(id, name, c.QueryParam("contentType"), st, cv)
		return err
	})
	if err != nil {
		return err
	}
	return c.Blob(http.StatusCreated, echo.MIMEApplicationJSONCharsetUTF8, appendAttachmentDetails(nil, &info))
}

// getAttachment serves GET /attachments?id=&name=: the content, streamed
// chunk by chunk, with its details in headers.
func (a *API) getAttachment(c echo.Context) error {
	db, id, name, err := a.attachmentParams(c)
	if err != nil {
		return err
	}
	return a.sendAttachment(c, db, id, name)
}

// postAttachment serves POST /attachments (GetAttachmentOperation with a
// type other than Document): only Document attachments exist here.
func (a *API) postAttachment(c echo.Context) error {
	db, id, name, err := a.attachmentParams(c)
	if err != nil {
		return err
	}
	var req struct {
		Type         string
		ChangeVector *string
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 64<<10))
	if err != nil {
		return err
	}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return dberr.New(dberr.BadRequest, "Invalid attachment request: %v", err)
		}
	}
	if req.Type != "" && req.Type != "Document" {
		return dberr.New(dberr.BadRequest, "Attachments of type '%s' are not supported (revisions' attachments are not kept)", req.Type)
	}
	return a.sendAttachment(c, db, id, name)
}

func (a *API) sendAttachment(c echo.Context, db *storage.DB, id, name string) error {
	ctx := c.Request().Context()
	info, err := db.Attachment(ctx, id, name)
	if err != nil {
		return err
	}
	if info == nil {
		return c.NoContent(http.StatusNotFound)
	}
	ok, err := db.HasContent(ctx, info.Hash)
	if err != nil {
		return err
	}
	if !ok {
		return dberr.New(dberr.NotFound, "The content of attachment '%s' of document %s (hash %s) is not on this node yet", name, id, info.Hash)
	}
	h := c.Response().Header()
	ct := info.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Attachment-Hash", info.Hash)
	h.Set("Attachment-Size", strconv.FormatInt(info.Size, 10))
	h.Set("ETag", `"`+info.ChangeVector+`"`)
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("X-Content-Type-Options", "nosniff")
	c.Response().WriteHeader(http.StatusOK)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	r := db.OpenContent(ctx, info.Hash)
	defer r.Close()
	if _, err := io.CopyBuffer(c.Response(), r, make([]byte, 32<<10)); err != nil && a.Log != nil {
		a.Log.Warn("attachment download cut", "db", db.Name(), "id", id, "name", name, "err", err)
	}
	return nil
}

// headAttachment serves HEAD /attachments?id=&name= (session.attachments
// .exists): 200 with the ETag, 304 when If-None-Match matches, 404.
func (a *API) headAttachment(c echo.Context) error {
	db, id, name, err := a.attachmentParams(c)
	if err != nil {
		return err
	}
	info, err := db.Attachment(c.Request().Context(), id, name)
	if err != nil {
		return err
	}
	if info == nil {
		return c.NoContent(http.StatusNotFound)
	}
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && unquote(inm) == info.ChangeVector {
		return c.NoContent(http.StatusNotModified)
	}
	c.Response().Header().Set("ETag", `"`+info.ChangeVector+`"`)
	return c.NoContent(http.StatusOK)
}

// deleteAttachment serves DELETE /attachments?id=&name=: 204.
func (a *API) deleteAttachment(c echo.Context) error {
	db, id, name, err := a.attachmentParams(c)
	if err != nil {
		return err
	}
	cv, err := expectedCV(c)
	if err != nil {
		return err
	}
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("api")
		_, _, err := tx.DeleteAttachment(id, name, cv)
		return err
	})
	var de *dberr.Error
	if errors.As(err, &de) && de.Kind == dberr.NotFound {
		return c.NoContent(http.StatusNoContent) // nothing to delete
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// parseBatch reads a bulk_docs body: JSON, or multipart (the session's
// SaveChanges with attachments: the commands part first, then one part per
// AttachmentPUT command, in order), whose parts are staged to files.
func (a *API) parseBatch(c echo.Context, db *storage.DB) (cmds []batch.Command, clusterWide bool, err error) {
	mt, params, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	if !strings.HasPrefix(mt, "multipart/") {
		return batch.ParseMaxMode(c.Request().Body, a.MaxDocumentSize)
	}
	if params["boundary"] == "" {
		return nil, false, dberr.New(dberr.BadRequest, "Invalid batch request: multipart without a boundary")
	}
	mr := multipart.NewReader(c.Request().Body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		return nil, false, dberr.New(dberr.BadRequest, "Invalid batch request: %v", err)
	}
	cmds, clusterWide, err = batch.ParseMaxMode(part, a.MaxDocumentSize)
	if err != nil {
		return nil, false, err
	}
	next := 0
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			batch.RemoveStaged(cmds)
			return nil, false, dberr.New(dberr.BadRequest, "Invalid batch request: %v", err)
		}
		for next < len(cmds) && cmds[next].Type != batch.AttachmentPut {
			next++
		}
		if next == len(cmds) {
			batch.RemoveStaged(cmds)
			return nil, false, dberr.New(dberr.BadRequest, "Invalid batch request: more attachment parts than AttachmentPUT commands")
		}
		st, err := db.StageAttachment(part, a.maxAttachment())
		if err != nil {
			batch.RemoveStaged(cmds)
			return nil, false, err
		}
		cmds[next].Attachment = st
		next++
	}
	return cmds, clusterWide, nil
}

// appendAttachmentResult writes the result of an attachment command.
func appendAttachmentResult(buf []byte, r batch.Result) []byte {
	info := r.Attachment
	if r.Type == batch.AttachmentDelete {
		buf = append(buf, `{"Type":"AttachmentDELETE","@id":`...)
		buf = document.AppendString(buf, r.ID)
		buf = append(buf, `,"Name":`...)
		buf = document.AppendString(buf, info.Name)
		buf = append(buf, `,"DocumentChangeVector":`...)
		buf = document.AppendString(buf, r.ChangeVector)
		return append(buf, '}')
	}
	buf = append(buf, `{"Type":"AttachmentPUT","Id":`...)
	buf = document.AppendString(buf, info.DocumentID)
	buf = append(buf, `,"Name":`...)
	buf = document.AppendString(buf, info.Name)
	buf = append(buf, `,"ChangeVector":`...)
	buf = document.AppendString(buf, info.ChangeVector)
	buf = append(buf, `,"Hash":`...)
	buf = document.AppendString(buf, info.Hash)
	buf = append(buf, `,"ContentType":`...)
	buf = document.AppendString(buf, info.ContentType)
	buf = append(buf, `,"Size":`...)
	buf = strconv.AppendInt(buf, info.Size, 10)
	buf = append(buf, `,"DocumentChangeVector":`...)
	buf = document.AppendString(buf, info.ChangeVector)
	return append(buf, '}')
}
