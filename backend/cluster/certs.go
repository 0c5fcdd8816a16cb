package cluster

import (
	"context"
	"sort"
	"strings"

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
