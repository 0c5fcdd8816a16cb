package studio

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
	"github.com/rookerydb/rookery/views"
)

// Counters on the document page: the list (with each copy's part) and the
// increment and delete forms.

func (s *Studio) registerCounters(g *echo.Group) {
	g.POST("/doc/counters/increment", s.incrementCounter)
	g.POST("/doc/counters/delete", s.deleteCounter)
}

// maxStudioCounters bounds the counters the document page lists.
const maxStudioCounters = 500

// docCounters reads a document's counters for its page.
func docCounters(ctx context.Context, db *storage.DB, id string) (*views.DocCounters, error) {
	out := &views.DocCounters{DB: db.Name(), ID: id}
	if !db.HasCounters() {
		return out, nil
	}
	cs, err := db.Counters(ctx, id, nil)
	if err != nil {
		return nil, err
	}
	if len(cs) > maxStudioCounters {
		cs = cs[:maxStudioCounters]
	}
	for _, c := range cs {
		row := views.CounterRow{Name: c.Name, Total: c.Total}
		for _, p := range c.Parts {
			if !p.Deleted {
				row.Parts = append(row.Parts, views.CounterPartRow{Tag: p.Tag, DBID: p.DB, Value: p.Value})
			}
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// incrementCounter serves POST /studio/db/{db}/doc/counters/increment.
func (s *Studio) incrementCounter(c echo.Context) error {
	return s.counterForm(c, true)
}

// deleteCounter serves POST /studio/db/{db}/doc/counters/delete.
func (s *Studio) deleteCounter(c echo.Context) error {
	return s.counterForm(c, false)
}

func (s *Studio) counterForm(c echo.Context, increment bool) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if err := s.readDocForm(c, db.Name()); err != nil {
		return err
	}
	id, name := c.FormValue("id"), strings.TrimSpace(c.FormValue("name"))
	if id == "" {
		return s.studioError(c, db.Name(), dberr.New(dberr.BadRequest, "Which document? The form has no id."))
	}
	back := string(views.DocURL(db.Name(), id))
	if err := storage.ValidateCounterName(name); err != nil {
		return redirectFlash(c, back, "Not changed: "+err.Error()+".", true)
	}
	var delta int64
	if increment {
		if delta, err = strconv.ParseInt(strings.TrimSpace(c.FormValue("delta")), 10, 64); err != nil {
			return redirectFlash(c, back, "Not changed: the amount to add must be a whole number.", true)
		}
	}
	var total int64
	var deleted bool
	err = db.Write(c.Request().Context(), func(tx *storage.Tx) error {
		tx.SetActor("studio")
		if increment {
			ct, err := tx.IncrementCounter(id, name, delta)
			total = ct.Total
			return err
		}
		var err error
		deleted, err = tx.DeleteCounter(id, name)
		return err
	})
	var missing storage.MissingDocumentError
	switch {
	case errors.As(err, &missing):
		return redirectFlash(c, back, "Not changed: the document does not exist any more.", true)
	case dberr.Is(err, dberr.BadRequest):
		return redirectFlash(c, back, "Not changed: "+err.Error()+".", true)
	case err != nil:
		return s.studioError(c, db.Name(), err)
	case increment:
		return redirectFlash(c, back, "Counter "+name+" is now "+strconv.FormatInt(total, 10)+".", false)
	case !deleted:
		return redirectFlash(c, back, "Counter "+name+" was already gone.", true)
	}
	return redirectFlash(c, back, "Deleted counter "+name+".", false)
}
