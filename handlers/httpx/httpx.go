// Package httpx holds the few HTTP helpers that both handler packages,
// handlers/api (the RavenDB-compatible wire protocol) and handlers/studio
// (the studio's pages), and the router assembly in web/ need. It exists so
// that neither handler package imports the other: what they share in
// meaning lives in the backend domain packages; what they share here is
// purely HTTP (a client for node-to-node requests, the same-origin check,
// where a handler names the object of an audited action). Keep it that
// small: no handler, no view, no domain rule belongs here.
package httpx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// NodeClient sends a request to another node with this node's credentials
// (its certificate, or the cluster's secret). Timeouts come from the
// request's context.
type NodeClient interface {
	Do(req *http.Request) (*http.Response, error)
}

// plainNodes is the NodeClient of a node built without one (tests that
// drive the handlers directly): no credentials.
var plainNodes NodeClient = &http.Client{}

// OrPlain is n, or a client without credentials when n is nil.
func OrPlain(n NodeClient) NodeClient {
	if n == nil {
		return plainNodes
	}
	return n
}

// AuditTargetKey is where a handler names what an audited action was
// about (web/access.go records it).
const AuditTargetKey = "audit.target"

// SetAuditTarget names the object of an audited action.
func SetAuditTarget(c echo.Context, target string) { c.Set(AuditTargetKey, target) }

// GetJSON asks another node for a JSON answer of at most limit bytes and
// decodes it into out. A status other than 200 is an error carrying the
// start of the answer (its envelope's message when it has one).
func GetJSON(ctx context.Context, n NodeClient, url string, limit int64, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := OrPlain(n).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, ErrorText(resp.Body))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return err
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("the answer is over %d bytes", limit)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("unreadable answer: %w", err)
	}
	return nil
}

// ErrorText is the readable part of a refused request's answer: its
// envelope's Message (or Error), else its first 300 characters.
func ErrorText(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var env struct{ Message, Error string }
	if json.Unmarshal(b, &env) == nil && (env.Message != "" || env.Error != "") {
		if env.Message != "" {
			return env.Message
		}
		b = []byte(env.Error)
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	if msg == "" {
		msg = "no details"
	}
	return msg
}
