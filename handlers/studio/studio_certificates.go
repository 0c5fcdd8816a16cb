package studio

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/alerts"
	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/pki"
	"github.com/rookerydb/rookery/handlers/httpx"
	"github.com/rookerydb/rookery/views"
)

// The Certificates page: the registered client certificates, this node's
// own and the well-known admins; registering one (a PEM pasted or
// uploaded) and revoking one go through cluster.Registration and
// cluster.Revocable, which decide who may grant and revoke what (the API's
// certificate endpoints use them too).

const certificatesPath = "/studio/certificates"

// maxCertificateBody bounds the certificate the register form takes (the
// API's PUT /admin/certificates body has the same bound).
const maxCertificateBody = 256 << 10

// certAlertPrefix starts the keys of the certificate expiry alerts.
const certAlertPrefix = "certificate/"

// certPermissionRows is how many database rows the register form offers.
const certPermissionRows = 5

// certCheckInterval is how often the expiry alerts are re-evaluated when
// the cluster state has not changed (a certificate registered or revoked
// is re-evaluated at the next tick).
const certCheckInterval = time.Hour

func (s *Studio) registerCertificates(g *echo.Group) {
	g.GET("/certificates", s.certificatesPage)
	g.POST("/certificates", s.registerCertificate)
	g.POST("/certificates/revoke", s.revokeCertificate)
	s.addLive("certificates", s.certificatesLive, false)
}

// serverCertificate is this node's own certificate as a row ("" when the
// node is unsecured).
func (s *Studio) serverCertificate() (views.CertRow, bool) {
	if s.ServerCertificate == "" {
		return views.CertRow{}, false
	}
	der, err := base64.StdEncoding.DecodeString(s.ServerCertificate)
	if err != nil {
		return views.CertRow{}, false
	}
	x, err := pki.ParseCertificate(der)
	if err != nil {
		return views.CertRow{}, false
	}
	return views.CertRow{
		Name: x.Subject.CommonName, Thumbprint: pki.Thumbprint(x.Raw), Clearance: string(auth.ClusterNode),
		NotBefore: x.NotBefore.UTC(), NotAfter: x.NotAfter.UTC(), Subject: x.Subject.String(), Issuer: x.Issuer.String(),
	}, true
}

// certificatesData gathers the page for the viewer in ctx.
func (s *Studio) certificatesData(ctx context.Context) views.CertificatesData {
	id := auth.FromContext(ctx)
	d := views.CertificatesData{Now: time.Now(), Secured: s.UnsecuredAccess == ""}
	if s.Cluster != nil {
		for _, cert := range s.Cluster.Certificates() {
			row := views.CertRow{
				Name: cert.Name, Thumbprint: cert.Thumbprint, Clearance: string(cert.SecurityClearance),
				Permissions: cert.SortedPermissions(), NotBefore: cert.NotBefore, NotAfter: cert.NotAfter,
				Subject: cert.Subject, Issuer: cert.Issuer, Added: cert.Added, AddedBy: cert.AddedBy,
			}
			switch {
			case id != nil && id.Thumbprint == cert.Thumbprint:
				row.You = true
				row.RevokeNote = "You are using this certificate; revoke it with another administrator certificate."
			case !id.CanManage(cert.SecurityClearance):
				row.RevokeNote = "Only a ClusterAdmin may revoke a " + string(cert.SecurityClearance) + " certificate."
			default:
				row.CanRevoke = true
			}
			d.Rows = append(d.Rows, row)
		}
	}
	sort.Slice(d.Rows, func(i, j int) bool {
		if !strings.EqualFold(d.Rows[i].Name, d.Rows[j].Name) {
			return strings.ToLower(d.Rows[i].Name) < strings.ToLower(d.Rows[j].Name)
		}
		return d.Rows[i].Thumbprint < d.Rows[j].Thumbprint
	})
	if row, ok := s.serverCertificate(); ok {
		d.Server = &row
	}
	d.WellKnown = append(d.WellKnown, s.WellKnownAdmins...)
	for _, c := range []auth.Clearance{auth.ValidUser, auth.Operator, auth.ClusterAdmin} {
		if id.CanManage(c) {
			d.Clearances = append(d.Clearances, string(c))
		}
	}
	if s.Catalog != nil {
		d.Databases = auth.Readable(ctx, s.Catalog.Names())
	}
	return d
}

func (s *Studio) certificatesPage(c echo.Context) error {
	d := s.certificatesData(c.Request().Context())
	d.Form = views.CertForm{Clearance: string(auth.ValidUser), Permissions: make([]views.CertPermission, certPermissionRows)}
	return render(c, http.StatusOK, s.chrome(c, "Certificates", "", views.NavCertificates, "certificates"), views.CertificatesPage(d))
}

func (s *Studio) certificatesLive(ctx context.Context, q url.Values) ([]views.Fragment, error) {
	return []views.Fragment{{ID: "certificates-list", C: views.CertificatesList(s.certificatesData(ctx))}}, nil
}

// readCertificateForm reads the register form (multipart, for the file
// upload, or urlencoded), bounded by maxCertificateBody.
func readCertificateForm(c echo.Context) (views.CertForm, []byte, error) {
	var f views.CertForm
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, maxCertificateBody+64<<10)
	var err error
	if strings.HasPrefix(r.Header.Get(echo.HeaderContentType), echo.MIMEMultipartForm) {
		err = r.ParseMultipartForm(maxCertificateBody)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return f, nil, dberr.New(dberr.BadRequest, "The form is over %d KiB; a certificate is a few KiB", (maxCertificateBody+64<<10)>>10)
		}
		return f, nil, dberr.New(dberr.BadRequest, "Unreadable form: %v", err)
	}
	f.Name = strings.TrimSpace(r.FormValue("name"))
	f.Clearance = r.FormValue("clearance")
	f.PEM = r.FormValue("pem")
	dbs, accs := r.Form["permDb"], r.Form["permAccess"]
	for i := range dbs {
		p := views.CertPermission{Database: strings.TrimSpace(dbs[i])}
		if i < len(accs) {
			p.Access = accs[i]
		}
		f.Permissions = append(f.Permissions, p)
	}
	cert := []byte(strings.TrimSpace(f.PEM))
	if r.MultipartForm != nil && len(r.MultipartForm.File["file"]) > 0 {
		fh := r.MultipartForm.File["file"][0]
		if fh.Size > 0 {
			if len(cert) > 0 {
				return f, nil, dberr.New(dberr.BadRequest, "Give the certificate once: paste it or upload a file, not both")
			}
			file, err := fh.Open()
			if err != nil {
				return f, nil, dberr.New(dberr.BadRequest, "Unreadable upload: %v", err)
			}
			defer file.Close()
			cert, err = io.ReadAll(io.LimitReader(file, maxCertificateBody+1))
			if err != nil {
				return f, nil, dberr.New(dberr.BadRequest, "Unreadable upload: %v", err)
			}
			if len(cert) > maxCertificateBody {
				return f, nil, dberr.New(dberr.BadRequest, "The file is over %d KiB; a certificate is a few KiB", maxCertificateBody>>10)
			}
		}
	}
	if len(cert) == 0 {
		return f, nil, dberr.New(dberr.BadRequest, "Paste the certificate (PEM) or choose its file (.pem, .crt, .cer)")
	}
	if strings.Contains(string(cert), "PRIVATE KEY") {
		// A client's .pem often holds its private key too: only the
		// certificate is read, and the key is not echoed back by a form
		// shown again.
		f.PEM = ""
	}
	return f, cert, nil
}

// permissionsOf turns the form's rows into cluster.Registration's map.
func permissionsOf(f views.CertForm) (map[string]string, error) {
	perms := map[string]string{}
	for _, p := range f.Permissions {
		if p.Database == "" {
			continue
		}
		key := strings.ToLower(p.Database)
		if _, dup := perms[key]; dup {
			return nil, dberr.New(dberr.BadRequest, "Database %s is listed twice; give each database one access level", p.Database)
		}
		perms[key] = p.Access
	}
	if len(perms) > 0 && f.Clearance != string(auth.ValidUser) {
		return nil, dberr.New(dberr.BadRequest, "Only ValidUser certificates carry database permissions: an %s has access to every database", f.Clearance)
	}
	return perms, nil
}

func (s *Studio) registerCertificate(c echo.Context) error {
	f, cert, err := readCertificateForm(c)
	if err == nil && s.Cluster == nil {
		err = dberr.New(dberr.InvalidOperation, "This node cannot register certificates")
	}
	var perms map[string]string
	if err == nil {
		perms, err = permissionsOf(f)
	}
	var reg auth.Certificate
	if err == nil {
		reg, err = s.Cluster.Registration(auth.FromContext(c.Request().Context()), f.Name, cert, f.Clearance, perms, time.Now())
	}
	if err == nil {
		httpx.SetAuditTarget(c, reg.Thumbprint+" "+reg.Name+" "+string(reg.SecurityClearance))
		_, err = s.Cluster.PutCertificate(c.Request().Context(), reg)
	}
	if err != nil {
		return s.certificateFormError(c, f, err)
	}
	return redirectFlash(c, certificatesPath, fmt.Sprintf("Certificate %s registered (%s, %s).", reg.Name, reg.Thumbprint, reg.SecurityClearance), false)
}

// certificateFormError shows the page again with the form as it was sent
// and what was wrong with it.
func (s *Studio) certificateFormError(c echo.Context, f views.CertForm, err error) error {
	status := http.StatusBadRequest
	switch dberr.KindOf(err) {
	case dberr.Forbidden:
		status = http.StatusForbidden
	case dberr.Unavailable:
		status = http.StatusServiceUnavailable
	case dberr.BadRequest, dberr.InvalidOperation, dberr.NotFound:
	default:
		if errors.Is(err, context.Canceled) {
			return err
		}
		status = http.StatusInternalServerError
	}
	for len(f.Permissions) < certPermissionRows {
		f.Permissions = append(f.Permissions, views.CertPermission{})
	}
	f.Error = err.Error()
	d := s.certificatesData(c.Request().Context())
	d.Form = f
	return render(c, status, s.chrome(c, "Certificates", "", views.NavCertificates, "certificates"), views.CertificatesPage(d))
}

func (s *Studio) revokeCertificate(c echo.Context) error {
	tp := strings.ToUpper(strings.TrimSpace(c.FormValue("thumbprint")))
	if s.Cluster == nil {
		return redirectFlash(c, certificatesPath, "This node cannot revoke certificates.", true)
	}
	cert, ok := s.Cluster.Certificate(tp)
	if !ok {
		return redirectFlash(c, certificatesPath, "Certificate "+tp+" is not registered; nothing was revoked.", true)
	}
	if c.FormValue("confirm") != cert.Name {
		return redirectFlash(c, certificatesPath, "Type the certificate's name exactly to revoke it; nothing was revoked.", true)
	}
	old, err := s.Cluster.Revocable(auth.FromContext(c.Request().Context()), tp)
	if err == nil {
		httpx.SetAuditTarget(c, old.Name)
		_, err = s.Cluster.DeleteCertificate(c.Request().Context(), old.Thumbprint)
	}
	if err != nil {
		return redirectFlash(c, certificatesPath, "Revoking "+cert.Name+" failed: "+err.Error(), true)
	}
	return redirectFlash(c, certificatesPath, "Certificate "+cert.Name+" ("+tp+") revoked.", false)
}

// certCheck remembers when the expiry alerts were last evaluated.
type certCheck struct {
	mu      sync.Mutex
	last    time.Time
	applied uint64
}

// certWarning is how close to its end a certificate is flagged:
// CertificateWarning (the node's --alert-certificate-days), or 30 days.
func (s *Studio) certWarning() time.Duration {
	if s.CertificateWarning > 0 {
		return s.CertificateWarning
	}
	return views.ExpiryWarning
}

// certificateTick raises an alert for each certificate (registered, or
// this node's own) that expires within certWarning or has expired, and
// clears the alerts of certificates renewed or revoked since (all of its
// prefix, so also those kept across a restart). Every node runs it over
// the replicated registrations. It re-evaluates when the cluster state
// moved, and otherwise hourly.
func (s *Studio) certificateTick(now time.Time) {
	if s.Alerts == nil || s.Cluster == nil {
		return
	}
	cc := &s.certCheck
	cc.mu.Lock()
	defer cc.mu.Unlock()
	applied := s.Cluster.AppliedIndex()
	if !cc.last.IsZero() && applied == cc.applied && now.Sub(cc.last) < certCheckInterval {
		return
	}
	cc.last, cc.applied = now, applied
	var want []alerts.Alert
	warn := s.certWarning()
	check := func(name, tp, clearance string, notAfter time.Time, self bool) {
		state := ""
		switch {
		case notAfter.IsZero():
		case !now.Before(notAfter):
			state = "expired"
		case notAfter.Sub(now) <= warn:
			state = "expiring"
		}
		if state == "" {
			return
		}
		key := certAlertPrefix + state + "/" + tp
		a := alerts.Alert{Key: key, Level: alerts.Warning, Link: certificatesPath, OperatorOnly: true}
		when := notAfter.UTC().Format("2006-01-02 15:04 UTC")
		switch {
		case self && state == "expired":
			a.Level, a.Title = alerts.Error, "This node's certificate expired"
			a.Message = fmt.Sprintf("Node %s's certificate %s (%s) expired on %s: clients and the other nodes refuse it. Install a renewed node.pem and restart the node.", s.NodeTag, name, tp, when)
		case self:
			a.Title = "This node's certificate expires soon"
			a.Message = fmt.Sprintf("Node %s's certificate %s (%s) %s, on %s. Install a renewed node.pem on every node before then.", s.NodeTag, name, tp, views.ExpiryText(notAfter, now), when)
		case state == "expired":
			a.Level, a.Title = alerts.Error, "Certificate expired"
			a.Message = fmt.Sprintf("The %s certificate %s (%s) expired on %s: this cluster refuses it. Register its replacement on the Certificates page, then revoke it.", clearance, name, tp, when)
		default:
			a.Title = "Certificate expires soon"
			a.Message = fmt.Sprintf("The %s certificate %s (%s) %s, on %s. Register its replacement on the Certificates page and hand it to its users before then.", clearance, name, tp, views.ExpiryText(notAfter, now), when)
		}
		want = append(want, a)
	}
	for _, cert := range s.Cluster.Certificates() {
		check(cert.Name, cert.Thumbprint, string(cert.SecurityClearance), cert.NotAfter, false)
	}
	if row, ok := s.serverCertificate(); ok {
		check(row.Name, row.Thumbprint, row.Clearance, row.NotAfter, true)
	}
	s.Alerts.Sync(certAlertPrefix, want)
}
