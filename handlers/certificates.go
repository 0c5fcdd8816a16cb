package handlers

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/audit"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/document"
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

// AuditTargetKey is where a handler names what an audited action was
// about (web/access.go records it).
const AuditTargetKey = "audit.target"

// setAuditTarget names the object of an audited action.
func setAuditTarget(c echo.Context, target string) { c.Set(AuditTargetKey, target) }

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

// PutCertificate registers a certificate on behalf of the caller, checking
// that the caller may grant the clearance. The studio uses it too.
func PutCertificate(c echo.Context, a *API, name string, certText []byte, clearance string, perms map[string]string) (auth.Certificate, error) {
	caller := auth.FromContext(c.Request().Context())
	cl, err := auth.ParseClearance(clearance)
	if err != nil {
		return auth.Certificate{}, err
	}
	if !caller.CanManage(cl) {
		return auth.Certificate{}, dberr.New(dberr.Forbidden, "Only a ClusterAdmin may register a %s certificate", cl)
	}
	by := ""
	if caller != nil {
		by = caller.Name
	}
	cert, err := auth.NewCertificate(name, certText, cl, perms, time.Now(), by)
	if err != nil {
		return cert, err
	}
	if old, ok := a.Cluster.Certificate(cert.Thumbprint); ok && !caller.CanManage(old.SecurityClearance) {
		return cert, dberr.New(dberr.Forbidden, "Only a ClusterAdmin may replace the %s certificate %s", old.SecurityClearance, old.Thumbprint)
	}
	setAuditTarget(c, cert.Thumbprint+" "+cert.Name+" "+string(cert.SecurityClearance))
	_, err = a.Cluster.PutCertificate(c.Request().Context(), cert)
	return cert, err
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
	if _, err := PutCertificate(c, a, req.Name, []byte(req.Certificate), req.SecurityClearance, req.Permissions); err != nil {
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
	_, err = PutCertificate(c, a, name, []byte(old.Certificate), clearance, req.Permissions)
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// DeleteCertificate revokes a registration on behalf of the caller. The
// certificate a caller is using cannot be revoked by that caller (it would
// lock them out mid-request).
func DeleteCertificate(c echo.Context, a *API, thumbprint string) error {
	thumbprint = strings.ToUpper(strings.TrimSpace(thumbprint))
	old, ok := a.Cluster.Certificate(thumbprint)
	if !ok {
		return dberr.New(dberr.NotFound, "Certificate '%s' is not registered", thumbprint)
	}
	caller := auth.FromContext(c.Request().Context())
	if !caller.CanManage(old.SecurityClearance) {
		return dberr.New(dberr.Forbidden, "Only a ClusterAdmin may revoke the %s certificate %s", old.SecurityClearance, old.Thumbprint)
	}
	if caller != nil && caller.Thumbprint == thumbprint {
		return dberr.New(dberr.InvalidOperation, "You cannot revoke the certificate you are using (%s); use another administrator certificate", thumbprint)
	}
	setAuditTarget(c, old.Name)
	_, err := a.Cluster.DeleteCertificate(c.Request().Context(), thumbprint)
	return err
}

func (a *API) deleteCertificate(c echo.Context) error {
	tp, err := requiredParam(c, "thumbprint")
	if err != nil {
		return err
	}
	if err := DeleteCertificate(c, a, tp); err != nil {
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
