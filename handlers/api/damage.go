package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/dberr"
)

// reseed serves POST /admin/databases/reseed?name=db: this node's damaged
// copy is moved aside (kept for forensics) and replaced with a new, empty
// copy with a new database id, which replication from the other members
// fills. It is refused for a database that is not damaged here, or that
// has no other member to fill it from.
func (a *API) reseed(c echo.Context) error {
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	if a.Reseed == nil {
		return dberr.New(dberr.InvalidOperation, "re-seeding is not available on this node")
	}
	msg, err := a.Reseed(c.Request().Context(), name)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]string{"Database": name, "Message": msg})
}
