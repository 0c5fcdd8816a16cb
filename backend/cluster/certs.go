package cluster

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
)

// Certificates are part of the cluster state: every node authenticates
// clients against the same registrations (RavenDB keeps them cluster-wide
// too).
const (
	opCertPut    = "certificate_put"
	opCertDelete = "certificate_delete"
	// opJoinNonce records (Key) or clears (no Key) a joining node's nonce.
	opJoinNonce = "join_nonce"
)

func init() {
	validators[opCertPut] = func(c *Command) error {
		if c.Certificate == nil {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: no certificate", c.Op)
		}
		return c.Certificate.Validate()
	}
	validators[opCertDelete] = func(c *Command) error {
		if c.Key == "" || len(c.Key) > 64 {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: no thumbprint", c.Op)
		}
		return nil
	}
	validators[opJoinNonce] = func(c *Command) error {
		if err := names.NodeTag(c.Tag); err != nil {
			return err
		}
		if c.Key != "" && (len(c.Key) != 32 || strings.Trim(c.Key, "0123456789abcdef") != "") {
			return dberr.New(dberr.BadRequest, "invalid cluster command %q: the nonce is 32 hex digits", c.Op)
		}
		return nil
	}
	appliers[opJoinNonce] = func(st *state, c *Command, _ uint64) Result {
		if st.JoinNonces == nil {
			st.JoinNonces = map[string]string{}
		}
		if c.Key == "" {
			delete(st.JoinNonces, c.Tag)
		} else {
			st.JoinNonces[c.Tag] = c.Key
		}
		return Result{}
	}
	appliers[opCertPut] = func(st *state, c *Command, _ uint64) Result {
		if st.Certificates == nil {
			st.Certificates = map[string]*auth.Certificate{}
		}
		cp := *c.Certificate
		st.Certificates[cp.Thumbprint] = &cp
		return Result{}
	}
	appliers[opCertDelete] = func(st *state, c *Command, _ uint64) Result {
		if _, ok := st.Certificates[c.Key]; !ok {
			return Result{Err: "Certificate '" + c.Key + "' is not registered.", Kind: "not_found"}
		}
		delete(st.Certificates, c.Key)
		return Result{}
	}
}

// PutCertificate registers a certificate (or replaces the registration of
// the same thumbprint) and returns once this node serves it.
func (c *Cluster) PutCertificate(ctx context.Context, cert auth.Certificate) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opCertPut, Certificate: &cert})
}

// DeleteCertificate revokes a registration.
func (c *Cluster) DeleteCertificate(ctx context.Context, thumbprint string) (Result, error) {
	return c.applyAndWait(ctx, Command{Op: opCertDelete, Key: thumbprint})
}

// Registration builds the registration caller asks for, refusing a
// clearance caller may not grant and the replacement of a registration of
// the same certificate that caller may not manage. Nothing is stored:
// PutCertificate stores what it returns. The API's certificate endpoints
// and the studio's Certificates page both register through it.
func (c *Cluster) Registration(caller *auth.Identity, name string, certText []byte, clearance string, perms map[string]string, now time.Time) (auth.Certificate, error) {
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
	cert, err := auth.NewCertificate(name, certText, cl, perms, now, by)
	if err != nil {
		return cert, err
	}
	if old, ok := c.Certificate(cert.Thumbprint); ok && !caller.CanManage(old.SecurityClearance) {
		return cert, dberr.New(dberr.Forbidden, "Only a ClusterAdmin may replace the %s certificate %s", old.SecurityClearance, old.Thumbprint)
	}
	return cert, nil
}

// Revocable returns the registration caller asks to revoke (thumbprint is
// normalised: trimmed, upper case), refusing one caller may not manage and
// the certificate caller is using (it would lock them out mid-request).
// Nothing is revoked: DeleteCertificate revokes the returned Thumbprint.
func (c *Cluster) Revocable(caller *auth.Identity, thumbprint string) (auth.Certificate, error) {
	thumbprint = strings.ToUpper(strings.TrimSpace(thumbprint))
	old, ok := c.Certificate(thumbprint)
	if !ok {
		return old, dberr.New(dberr.NotFound, "Certificate '%s' is not registered", thumbprint)
	}
	if !caller.CanManage(old.SecurityClearance) {
		return old, dberr.New(dberr.Forbidden, "Only a ClusterAdmin may revoke the %s certificate %s", old.SecurityClearance, old.Thumbprint)
	}
	if caller != nil && caller.Thumbprint == thumbprint {
		return old, dberr.New(dberr.InvalidOperation, "You cannot revoke the certificate you are using (%s); use another administrator certificate", thumbprint)
	}
	return old, nil
}

// Certificate finds a registered certificate by thumbprint.
func (c *Cluster) Certificate(thumbprint string) (auth.Certificate, bool) {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	cert, ok := c.fsm.st.Certificates[thumbprint]
	if !ok {
		return auth.Certificate{}, false
	}
	return *cert, true
}

// Renewed finds a registered certificate with this public-key pinning hash
// and issuer (auth.Registry; a scan of the registrations without copying
// them, as it runs for every unknown certificate).
func (c *Cluster) Renewed(pin, issuer string) (auth.Certificate, bool) {
	c.fsm.mu.RLock()
	defer c.fsm.mu.RUnlock()
	for _, cert := range c.fsm.st.Certificates {
		if cert.PublicKeyPinningHash == pin && cert.Issuer == issuer {
			return *cert, true
		}
	}
	return auth.Certificate{}, false
}

// Certificates lists the registered certificates by name.
func (c *Cluster) Certificates() []auth.Certificate {
	c.fsm.mu.RLock()
	out := make([]auth.Certificate, 0, len(c.fsm.st.Certificates))
	for _, cert := range c.fsm.st.Certificates {
		out = append(out, *cert)
	}
	c.fsm.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Thumbprint < out[j].Thumbprint
	})
	return out
}
