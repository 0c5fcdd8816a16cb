package studio

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// The document page's attachments: list, download, upload (a multipart
// POST form, streamed to a staged file), delete.

func (s *Studio) registerAttachments(g *echo.Group) {
	g.GET("/doc/attachment", s.downloadAttachment)
	g.POST("/doc/attachments", s.uploadAttachment)
	g.POST("/doc/attachments/delete", s.deleteAttachment)
}

// docAttachments lists a document's attachments for its page.
func docAttachments(ctx context.Context, db *storage.DB, id string) ([]views.DocAttachment, error) {
	refs, err := db.Attachments(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]views.DocAttachment, 0, len(refs))
	for _, r := range refs {
		out = append(out, views.DocAttachment{Name: r.Name, ContentType: r.ContentType, Hash: r.Hash, Size: r.Size})
	}
	return out, nil
}

// downloadAttachment serves GET /studio/db/{db}/doc/attachment?id=&name=:
// the content as a download, sandboxed and never sniffed.
func (s *Studio) downloadAttachment(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	id, name := c.QueryParam("id"), c.QueryParam("name")
	ctx := c.Request().Context()
	info, err := db.Attachment(ctx, id, name)
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if info == nil {
		return s.studioError(c, db.Name(), dberr.New(dberr.NotFound, "Document %q has no attachment %q.", id, name))
	}
	if ok, err := db.HasContent(ctx, info.Hash); err != nil || !ok {
		return s.studioError(c, db.Name(), dberr.New(dberr.NotFound, "The content of attachment %q is not on this node yet.", name))
	}
	h := c.Response().Header()
	ct := info.ContentType
	if _, _, err := mime.ParseMediaType(ct); err != nil || ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	h.Set("Content-Security-Policy", "sandbox")
	h.Set("X-Content-Type-Options", "nosniff")
	c.Response().WriteHeader(http.StatusOK)
	r := db.OpenContent(ctx, info.Hash)
	defer r.Close()
	_, _ = io.CopyBuffer(c.Response(), r, make([]byte, 32<<10))
	return nil
}

// uploadAttachment serves POST /studio/db/{db}/doc/attachments: a
// multipart form (id, name, contentType, then file), the file streamed
// into a staged file (the request is held to --max-request-body).
func (s *Studio) uploadAttachment(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "The upload form could not be read (%v); nothing was stored.", err))
	}
	fields := map[string]string{}
	var st *storage.Staged
	defer func() { st.Remove() }()
	fileName, fileType := "", ""
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "The upload form could not be read (%v); nothing was stored.", err))
		}
		if part.FormName() == "file" {
			if st != nil {
				return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Upload one file at a time; nothing was stored."))
			}
			fileName, fileType = part.FileName(), part.Header.Get("Content-Type")
			if st, err = db.StageAttachment(part, 0); err != nil {
				return s.studioError(c, db.Name(), err)
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(part, 4<<10))
		if err != nil {
			return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "The upload form could not be read (%v); nothing was stored.", err))
		}
		fields[part.FormName()] = string(v)
	}
	id := fields["id"]
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The form has no id."))
	}
	back := string(views.DocURL(db.Name(), id))
	if st == nil {
		return redirectFlash(c, back, "Choose a file to upload; nothing was stored.", true)
	}
	name := strings.TrimSpace(fields["name"])
	if name == "" {
		name = fileName
	}
	ct := strings.TrimSpace(fields["contentType"])
	if ct == "" {
		ct = fileType
	}
	if err := storage.ValidateAttachmentName(name); err != nil {
		return redirectFlash(c, back, "Not stored: "+err.Error()+".", true)
	}
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("studio")
		_, err := tx.PutAttachment(id, name, ct, st, nil)
		return err
	})
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	return redirectFlash(c, back, "Stored attachment "+name+" ("+strconv.FormatInt(st.Size, 10)+" bytes).", false)
}

// deleteAttachment serves POST /studio/db/{db}/doc/attachments/delete
// (id, name, confirm=yes).
func (s *Studio) deleteAttachment(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readDocForm(c, db.Name()); err != nil {
		return err
	}
	id, name := c.FormValue("id"), c.FormValue("name")
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The form has no id."))
	}
	back := string(views.DocURL(db.Name(), id))
	if c.FormValue("confirm") != "yes" {
		return redirectFlash(c, back, "Tick the confirmation box to delete; nothing was deleted.", true)
	}
	var deleted bool
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("studio")
		var err error
		_, deleted, err = tx.DeleteAttachment(id, name, nil)
		return err
	})
	if err != nil {
		return s.studioError(c, db.Name(), err)
	}
	if !deleted {
		return redirectFlash(c, back, "Attachment "+name+" was already gone.", true)
	}
	return redirectFlash(c, back, "Deleted attachment "+name+".", false)
}
