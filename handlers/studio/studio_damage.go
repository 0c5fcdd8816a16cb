package studio

import (
	"context"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/views"
)

// registerDamage adds the re-seed action of a damaged database.
func (s *Studio) registerDamage(g *echo.Group) {
	g.POST("/databases/reseed", s.reseedDatabase)
}

func (s *Studio) reseedDatabase(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	if s.Reseed == nil {
		return redirectFlash(c, "/studio/databases", "Re-seeding is not available on this node.", true)
	}
	msg, err := s.Reseed(c.Request().Context(), name)
	if err != nil {
		return redirectFlash(c, "/studio/databases", err.Error(), true)
	}
	return redirectFlash(c, "/studio/databases", msg, false)
}

// damagedRows are the databases this node holds but does not serve.
func (s *Studio) damagedRows(ctx context.Context) []views.DatabaseRow {
	var rows []views.DatabaseRow
	id := auth.FromContext(ctx)
	for _, d := range s.Catalog.Damaged() {
		if !id.Allows(auth.DatabaseRead, d.Name) {
			continue // what is wrong with a database is for those who may read it
		}
		rows = append(rows, views.DatabaseRow{Name: d.Name, Members: s.members(d.Name), Damage: d.Reason, DamageDetail: d.Detail, DamageDetected: d.Detected})
	}
	return rows
}
