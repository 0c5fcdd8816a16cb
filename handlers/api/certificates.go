package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/handlers/httpx"
)

// RavenDB's certificate endpoints (reference §3.6), over the registrations
// in the cluster state. Who may call them is in web/access.go; who may
// manage which clearance is auth.Identity.CanManage.
func (a *API) registerCertificates(e *echo.Echo) {
	e.PUT("/admin/certificates", a.putCertificate)
	e.GET("/admin/certificates", a.getCertificates)
	e.DELETE("/admin/certificates", a.deleteCertificate)
	e.POST("/admin/certificates/edit", a.editCertificate)
	e.GET("/certificates/whoami", a.whoAmI)
	e.GET("/admin/audit", a.auditLog)
}

// maxCertificateBody bounds a certificate request.
const maxCertificateBody = 256 << 10

type certificateRequest struct {
	Name              string
	Certificate       string
	SecurityClearance string
	Permissions       map[string]string
	Thumbprint        string // edit
}

func readCertificateRequest(c echo.Context) (certificateRequest, error) {
	var req certificateRequest
	err := readJSON(c, maxCertificateBody, &req, `Invalid body: expected {"Name","Certificate","SecurityClearance","Permissions"}`)
	return req, err
}

// registerCertificate registers a certificate on behalf of the caller
// (cluster.Registration decides whether the caller may), naming it as the
// audited action's target.
func (a *API) registerCertificate(c echo.Context, name string, certText []byte, clearance string, perms map[string]string) error {
	cert, err := a.Cluster.Registration(auth.FromContext(c.Request().Context()), name, certText, clearance, perms, time.Now())
	if err != nil {
		return err
	}
	httpx.SetAuditTarget(c, cert.Thumbprint+" "+cert.Name+" "+string(cert.SecurityClearance))
	_, err = a.Cluster.PutCertificate(c.Request().Context(), cert)
	return err
}

// putCertificate serves PUT /admin/certificates: RavenDB's
// PutClientCertificateOperation (204).
func (a *API) putCertificate(c echo.Context) error {
	req, err := readCertificateRequest(c)
	if err != nil {
		return err
	}
	if req.Certificate == "" {
		return dberr.New(dberr.BadRequest, "Certificate is required (the base64 DER or PEM of the certificate)")
	}
	if err := a.registerCertificate(c, req.Name, []byte(req.Certificate), req.SecurityClearance, req.Permissions); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// editCertificate serves POST /admin/certificates/edit: a new name,
// clearance or permissions for a registered thumbprint (204).
func (a *API) editCertificate(c echo.Context) error {
	req, err := readCertificateRequest(c)
	if err != nil {
		return err
	}
	old, ok := a.Cluster.Certificate(strings.ToUpper(strings.TrimSpace(req.Thumbprint)))
	if !ok {
		return dberr.New(dberr.NotFound, "Certificate '%s' is not registered", req.Thumbprint)
	}
	caller := auth.FromContext(c.Request().Context())
	if !caller.CanManage(old.SecurityClearance) {
		return dberr.New(dberr.Forbidden, "Only a ClusterAdmin may edit the %s certificate %s", old.SecurityClearance, old.Thumbprint)
	}
	name := req.Name
	if name == "" {
		name = old.Name
	}
	clearance := req.SecurityClearance
	if clearance == "" {
		clearance = string(old.SecurityClearance)
	}
	err = a.registerCertificate(c, name, []byte(old.Certificate), clearance, req.Permissions)
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// revokeCertificate revokes a registration on behalf of the caller
// (cluster.Revocable decides whether the caller may), naming it as the
// audited action's target.
func (a *API) revokeCertificate(c echo.Context, thumbprint string) error {
	old, err := a.Cluster.Revocable(auth.FromContext(c.Request().Context()), thumbprint)
	if err != nil {
		return err
	}
	httpx.SetAuditTarget(c, old.Name)
	_, err = a.Cluster.DeleteCertificate(c.Request().Context(), old.Thumbprint)
	return err
}

func (a *API) deleteCertificate(c echo.Context) error {
	tp, err := requiredParam(c, "thumbprint")
	if err != nil {
		return err
	}
	if err := a.revokeCertificate(c, tp); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ravenTime writes a date as RavenDB does (UTC, seven fraction digits):
// the npm client cannot parse one without the fraction.
func ravenTime(t time.Time) string { return t.UTC().Format(document.TimeFormat) }

// certificateJSON is RavenDB's CertificateDefinition (CertificateMetadata
// without the certificate's bytes).
func certificateJSON(cert auth.Certificate, metadataOnly bool) map[string]any {
	perms := map[string]string{}
	for db, acc := range cert.Permissions {
		perms[db] = string(acc)
	}
	out := map[string]any{
		"Name": cert.Name, "Thumbprint": cert.Thumbprint, "SecurityClearance": cert.SecurityClearance,
		"Permissions": perms, "NotAfter": ravenTime(cert.NotAfter), "NotBefore": ravenTime(cert.NotBefore),
		"PublicKeyPinningHash": cert.PublicKeyPinningHash, "CollectionPrimaryKey": "", "CollectionSecondaryKeys": []string{},
		"Subject": cert.Subject, "Issuer": cert.Issuer, "Added": ravenTime(cert.Added), "AddedBy": cert.AddedBy,
	}
	if !metadataOnly {
		out["Certificate"] = cert.Certificate
	}
	return out
}

// getCertificates serves GET /admin/certificates[?thumbprint=][&name=]
// [&metadataOnly=true][&start=&pageSize=].
func (a *API) getCertificates(c echo.Context) error {
	metadataOnly, err := boolParam(c, "metadataOnly")
	if err != nil {
		return err
	}
	all := a.Cluster.Certificates()
	if tp := strings.ToUpper(c.QueryParam("thumbprint")); tp != "" {
		var one []auth.Certificate
		for _, cert := range all {
			if cert.Thumbprint == tp {
				one = append(one, cert)
			}
		}
		all = one
	}
	if name := c.QueryParam("name"); name != "" {
		var named []auth.Certificate
		for _, cert := range all {
			if strings.EqualFold(cert.Name, name) {
				named = append(named, cert)
			}
		}
		all = named
	}
	start, pageSize, err := pagingWith(c, int64(len(all)))
	if err != nil {
		return err
	}
	start = min(start, len(all))
	all = all[start:min(len(all), start+pageSize)]
	results := make([]map[string]any, 0, len(all))
	for _, cert := range all {
		results = append(results, certificateJSON(cert, metadataOnly))
	}
	wk := a.WellKnownAdmins
	if wk == nil {
		wk = []string{}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Results": results, "LoadedServerCert": a.ServerThumbprint, "WellKnownAdminCertificates": wk})
}

// whoAmI serves GET /certificates/whoami: the caller's identity (null for
// a caller without an accepted certificate).
func (a *API) whoAmI(c echo.Context) error {
	id := auth.FromContext(c.Request().Context())
	if id == nil {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSONCharsetUTF8, []byte("null"))
	}
	perms := map[string]string{}
	for db, acc := range id.Permissions {
		perms[db] = string(acc)
	}
	var notAfter any
	if !id.NotAfter.IsZero() {
		notAfter = ravenTime(id.NotAfter)
	}
	return writeJSON(c, http.StatusOK, map[string]any{
		"Name": id.Name, "Thumbprint": id.Thumbprint, "SecurityClearance": id.Clearance, "Permissions": perms,
		"NotAfter": notAfter, "Unsecured": id.Unsecured, "NodeTag": a.NodeTag,
	})
}

// auditLog serves GET /admin/audit: this node's audit log, newest first
// (filters action, who, database; paging start, pageSize).
func (a *API) auditLog(c echo.Context) error {
	if a.Audit == nil {
		return dberr.New(dberr.InvalidOperation, "this node keeps no audit log")
	}
	start, pageSize, err := pagingWith(c, 1000)
	if err != nil {
		return err
	}
	f := audit.Filter{Action: c.QueryParam("action"), Who: c.QueryParam("who"), Database: c.QueryParam("database")}
	entries, total := a.Audit.List(f, start, pageSize)
	if entries == nil {
		entries = []audit.Entry{}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"NodeTag": a.NodeTag, "TotalResults": total, "Start": start, "Results": entries})
}
