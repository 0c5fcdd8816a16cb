package studio

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/views"
)

// cmpxchgRowsLimit bounds the rows the Compare Exchange page lists; the
// prefix filter narrows a longer list.
const cmpxchgRowsLimit = 500

// registerCmpXchg adds the Compare Exchange page and its put and delete
// forms.
func (s *Studio) registerCmpXchg(g *echo.Group) {
	g.GET("/cmpxchg", s.cmpxchgPage)
	g.POST("/cmpxchg/put", s.cmpxchgPut)
	g.POST("/cmpxchg/delete", s.cmpxchgDelete)
}

// objectOf is the value's Object as indented JSON, for the form.
func objectOf(v json.RawMessage) string {
	var w struct{ Object json.RawMessage }
	if json.Unmarshal(v, &w) != nil || len(w.Object) == 0 {
		return string(v)
	}
	if b, err := json.MarshalIndent(w.Object, "", "  "); err == nil {
		return string(b)
	}
	return string(w.Object)
}

func (s *Studio) cmpxchgPage(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	if s.Cluster == nil {
		return s.studioError(c, db.Name(), fmt.Errorf("compare exchange needs the cluster"))
	}
	prefix := c.QueryParam("prefix")
	all := s.Cluster.CmpXchgList(db.Name(), prefix)
	d := views.CmpXchgData{Database: db.Name(), Prefix: prefix, Total: len(all)}
	for _, v := range all[:min(len(all), cmpxchgRowsLimit)] {
		d.Rows = append(d.Rows, views.CmpXchgRow{Key: v.Key, Index: v.Index, Value: string(v.Value)})
	}
	if k := c.QueryParam("edit"); k != "" {
		if v, ok := s.Cluster.CmpXchg(db.Name(), k); ok {
			d.Form = views.CmpXchgForm{Key: v.Key, Index: v.Index, Value: objectOf(v.Value), Edit: true}
		}
	}
	if k := c.QueryParam("formKey"); k != "" { // a refused write coming back
		idx, _ := strconv.ParseUint(c.QueryParam("formIndex"), 10, 63)
		d.Form = views.CmpXchgForm{Key: k, Index: idx, Value: c.QueryParam("formValue"), Edit: c.QueryParam("formEdit") != ""}
	}
	return render(c, http.StatusOK, s.chrome(c, "Compare Exchange · "+db.Name(), db.Name(), views.NavCmpXchg, ""), views.CmpXchgPage(d))
}

// cmpxchgPut serves the add/edit form: the value is the Object's JSON,
// written only if the key's index is the one the form carries.
func (s *Studio) cmpxchgPut(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	page := string(views.DBURL(db.Name(), "cmpxchg"))
	key, raw, rawIndex := c.FormValue("key"), strings.TrimSpace(c.FormValue("value")), c.FormValue("index")
	back := func(msg string) error {
		q := url.Values{"formKey": {key}, "formIndex": {rawIndex}, "formValue": {raw}, "error": {msg}}
		if len(raw) > 64<<10 {
			q.Del("formValue")
		}
		return c.Redirect(http.StatusSeeOther, page+"?"+q.Encode()+"#cmpxchg-form")
	}
	if err := cluster.ValidCmpXchgKey(key); err != nil {
		return back(err.Error() + " Nothing was changed.")
	}
	index, err := strconv.ParseUint(strings.TrimSpace(rawIndex), 10, 63)
	if err != nil {
		return back("The expected index must be a whole number from 0 up (0 for a new key). Nothing was changed.")
	}
	if !json.Valid([]byte(raw)) {
		return back("The value is not valid JSON. Nothing was changed.")
	}
	value := []byte(`{"Object":` + raw + `}`)
	if err := cluster.CheckCmpXchgValue(value, cluster.MaxCmpXchgValue(s.MaxCmpXchgValueSize)); err != nil {
		return back(err.Error() + " Nothing was changed.")
	}
	r, err := s.Cluster.PutCmpXchg(c.Request().Context(), db.Name(), key, index, value, "")
	if err != nil {
		return back("The value was not saved: " + err.Error())
	}
	if !r.Successful {
		return back(fmt.Sprintf("%s is at index %d, not %d: someone changed it meanwhile (or it exists). Nothing was changed.", key, r.Index, index))
	}
	return redirectFlash(c, page, fmt.Sprintf("%s saved at index %d.", key, r.Index), false)
}

// cmpxchgDelete deletes a value if its index is still the one listed.
func (s *Studio) cmpxchgDelete(c echo.Context) error {
	db, err := s.studioDB(c)
	if err != nil {
		return s.studioError(c, "", err)
	}
	page := string(views.DBURL(db.Name(), "cmpxchg"))
	key := c.FormValue("key")
	if err := cluster.ValidCmpXchgKey(key); err != nil {
		return redirectFlash(c, page, err.Error(), true)
	}
	index, err := strconv.ParseUint(c.FormValue("index"), 10, 63)
	if err != nil {
		return redirectFlash(c, page, "The index must be a whole number. Nothing was deleted.", true)
	}
	r, err := s.Cluster.DeleteCmpXchg(c.Request().Context(), db.Name(), key, index, "")
	if err != nil {
		return redirectFlash(c, page, "Not deleted: "+err.Error(), true)
	}
	if !r.Successful {
		return redirectFlash(c, page, fmt.Sprintf("%s was not deleted: its index is %d, not %d (it changed meanwhile).", key, r.Index, index), true)
	}
	return redirectFlash(c, page, key+" deleted.", false)
}
