// Package auth is who may do what, in RavenDB's model: a client is
// identified by its X.509 certificate (no users, no passwords); a registered
// certificate carries a security clearance and, for ValidUser, a permission
// per database. Nodes of the cluster identify each other the same way, with
// the ClusterNode clearance. The package decides; the web layer asks it on
// every request (see web/access.go for which route needs what, and DESIGN.md
// for why it is built this way). It has no HTTP and no state of its own: the
// registered certificates live in the cluster state.
package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/names"
	"github.com/rookerydb/rookery/backend/pki"
)

// Clearance is a certificate's security clearance (RavenDB's wire values).
type Clearance string

const (
	// ClusterAdmin may do everything.
	ClusterAdmin Clearance = "ClusterAdmin"
	// ClusterNode is another node of the cluster (or this one): everything,
	// including the node-to-node routes nobody else may call.
	ClusterNode Clearance = "ClusterNode"
	// Operator may do everything to every database and most server
	// operations, but not change the cluster's topology nor manage
	// ClusterAdmin or ClusterNode certificates.
	Operator Clearance = "Operator"
	// ValidUser may use the databases its permissions list, each at its
	// access level.
	ValidUser Clearance = "ValidUser"
)

// ParseClearance reads a clearance as clients send it (case-insensitive).
func ParseClearance(s string) (Clearance, error) {
	for _, c := range []Clearance{ClusterAdmin, ClusterNode, Operator, ValidUser} {
		if strings.EqualFold(s, string(c)) {
			return c, nil
		}
	}
	return "", dberr.New(dberr.BadRequest, "SecurityClearance %q is not one of ClusterAdmin, ClusterNode, Operator, ValidUser", clip(s))
}

func (c Clearance) rank() int {
	switch c {
	case ClusterNode:
		return 4
	case ClusterAdmin:
		return 3
	case Operator:
		return 2
	case ValidUser:
		return 1
	}
	return 0
}

// Access is a ValidUser's access to one database.
type Access string

const (
	// Read allows reads and queries (and acting as a subscription worker).
	Read Access = "Read"
	// ReadWrite allows normal client work: documents, identities,
	// subscriptions, conflicts.
	ReadWrite Access = "ReadWrite"
	// Admin also allows the database's administrative routes.
	Admin Access = "Admin"
)

// ParseAccess reads an access level (case-insensitive).
func ParseAccess(s string) (Access, error) {
	for _, a := range []Access{Read, ReadWrite, Admin} {
		if strings.EqualFold(s, string(a)) {
			return a, nil
		}
	}
	return "", dberr.New(dberr.BadRequest, "database access %q is not one of Read, ReadWrite, Admin", clip(s))
}

func (a Access) rank() int {
	switch a {
	case Admin:
		return 3
	case ReadWrite:
		return 2
	case Read:
		return 1
	}
	return 0
}

// Level is what a route requires of its caller.
type Level int

const (
	// Public routes need nothing: health probes, static files, whoami.
	Public Level = iota
	// Authenticated routes need any known identity.
	Authenticated
	// DatabaseRead needs Read access to the route's database.
	DatabaseRead
	// DatabaseReadWrite needs ReadWrite access to the route's database.
	DatabaseReadWrite
	// DatabaseAdmin needs Admin access to the route's database.
	DatabaseAdmin
	// OperatorOnly needs Operator or above.
	OperatorOnly
	// ClusterAdminOnly needs ClusterAdmin (or a node).
	ClusterAdminOnly
	// NodeOnly is for the cluster's own traffic (Raft forwarding,
	// replication): only ClusterNode.
	NodeOnly
)

var levelNames = map[Level]string{Public: "Public", Authenticated: "ValidUser", DatabaseRead: "Read", DatabaseReadWrite: "ReadWrite",
	DatabaseAdmin: "DatabaseAdmin", OperatorOnly: "Operator", ClusterAdminOnly: "ClusterAdmin", NodeOnly: "ClusterNode"}

func (l Level) String() string { return levelNames[l] }

// Database tells whether the level is about one database.
func (l Level) Database() bool {
	return l == DatabaseRead || l == DatabaseReadWrite || l == DatabaseAdmin
}

func (l Level) access() Access {
	switch l {
	case DatabaseRead:
		return Read
	case DatabaseReadWrite:
		return ReadWrite
	}
	return Admin
}

// Identity is who is calling.
type Identity struct {
	// Name is the certificate's registered name (or its subject, or
	// "unsecured" when the server runs without authentication).
	Name       string
	Thumbprint string
	Clearance  Clearance
	// Permissions are a ValidUser's databases, by lower-cased name.
	Permissions map[string]Access
	// NotAfter is when the certificate expires (zero when unsecured).
	NotAfter time.Time
	// Unsecured is set when the server runs without authentication: every
	// caller is a ClusterAdmin (RavenDB's unsecured mode).
	Unsecured bool
}

// UnsecuredAdmin is every caller of a server without authentication.
var UnsecuredAdmin = &Identity{Name: "unsecured", Clearance: ClusterAdmin, Unsecured: true}

// Node is another node that proved it belongs to the cluster.
func Node(name, thumbprint string) *Identity {
	return &Identity{Name: name, Thumbprint: thumbprint, Clearance: ClusterNode}
}

// Access returns the identity's access to a database ("" for none).
func (id *Identity) Access(db string) Access {
	if id == nil {
		return ""
	}
	if id.Clearance.rank() >= Operator.rank() {
		return Admin
	}
	return id.Permissions[strings.ToLower(db)]
}

// Allows tells whether the identity may call a route of level l on
// database db (db matters only for the database levels).
func (id *Identity) Allows(l Level, db string) bool {
	if l == Public {
		return true
	}
	if id == nil {
		return false
	}
	switch l {
	case Authenticated:
		return true
	case DatabaseRead, DatabaseReadWrite, DatabaseAdmin:
		return id.Access(db).rank() >= l.access().rank()
	case OperatorOnly:
		return id.Clearance.rank() >= Operator.rank()
	case ClusterAdminOnly:
		return id.Clearance.rank() >= ClusterAdmin.rank()
	case NodeOnly:
		return id.Clearance == ClusterNode
	}
	return false
}

// Refusal explains why id may not call a route of level l on db, in the
// words of RavenDB's "insufficient security clearance" errors.
func (id *Identity) Refusal(l Level, db string) error {
	who := "This request"
	if id != nil {
		who = fmt.Sprintf("Certificate %s (%s, clearance %s)", id.Name, id.Thumbprint, id.Clearance)
	}
	need := l.String()
	if l.Database() {
		need = fmt.Sprintf("%s access to database '%s'", l.access(), db)
	}
	return dberr.New(dberr.Forbidden, "%s does not have the required security clearance: this needs %s", who, need)
}

// CanManage tells whether id may register, edit or revoke a certificate of
// clearance c: an Operator manages Operator and ValidUser certificates; only
// a ClusterAdmin (or a node) manages ClusterAdmin and ClusterNode ones.
func (id *Identity) CanManage(c Clearance) bool {
	if id == nil {
		return false
	}
	if c == ClusterAdmin || c == ClusterNode {
		return id.Clearance.rank() >= ClusterAdmin.rank()
	}
	return id.Clearance.rank() >= Operator.rank()
}

type ctxKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the caller's identity (nil when there is none).
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}

// Readable keeps the databases the caller in ctx may read (all of them for
// an Operator or above, and on an unsecured node). The API's database list
// and the studio's pages filter with it.
func Readable(ctx context.Context, names []string) []string {
	id := FromContext(ctx)
	out := names[:0:0]
	for _, n := range names {
		if id.Allows(DatabaseRead, n) {
			out = append(out, n)
		}
	}
	return out
}

// Certificate is a registered certificate: the cluster state holds these,
// by thumbprint.
type Certificate struct {
	Thumbprint        string
	Name              string
	SecurityClearance Clearance
	// Permissions are by lower-cased database name (ValidUser only).
	Permissions          map[string]Access `json:",omitempty"`
	NotBefore            time.Time
	NotAfter             time.Time
	PublicKeyPinningHash string
	Subject              string
	Issuer               string
	// Certificate is the base64 DER, as RavenDB's clients send and read it.
	Certificate string
	// Added and AddedBy say when and by whom it was registered.
	Added   time.Time
	AddedBy string `json:",omitempty"`
}

// maxCertName bounds a certificate's name.
const maxCertName = 200

// NewCertificate builds the record of a certificate someone registers:
// certText is PEM, base64 DER or DER; permissions use any case for the
// database names (RavenDB's npm client PascalCases them).
func NewCertificate(name string, certText []byte, clearance Clearance, permissions map[string]string, now time.Time, by string) (Certificate, error) {
	x, err := pki.ParseCertificate(certText)
	if err != nil {
		return Certificate{}, dberr.New(dberr.BadRequest, "Unable to read the certificate: %v", err)
	}
	c := Certificate{
		Thumbprint: pki.Thumbprint(x.Raw), Name: strings.TrimSpace(name), SecurityClearance: clearance,
		NotBefore: x.NotBefore.UTC(), NotAfter: x.NotAfter.UTC(), PublicKeyPinningHash: pki.PinningHash(x),
		Subject: x.Subject.String(), Issuer: x.Issuer.String(), Certificate: base64.StdEncoding.EncodeToString(x.Raw),
		Added: now.UTC(), AddedBy: by,
	}
	if c.Name == "" {
		c.Name = x.Subject.CommonName
	}
	if len(permissions) > 0 {
		c.Permissions = map[string]Access{}
		for db, a := range permissions {
			acc, err := ParseAccess(a)
			if err != nil {
				return Certificate{}, err
			}
			c.Permissions[strings.ToLower(db)] = acc
		}
	}
	if !now.IsZero() && now.After(c.NotAfter) {
		return Certificate{}, dberr.New(dberr.BadRequest, "The certificate %s expired on %s", c.Thumbprint, c.NotAfter.Format(time.RFC3339))
	}
	return c, c.Validate()
}

// Validate checks a certificate record (pure: the cluster's state machine
// runs it).
func (c Certificate) Validate() error {
	bad := func(format string, args ...any) error {
		return dberr.New(dberr.BadRequest, "certificate: "+format, args...)
	}
	if len(c.Thumbprint) != 40 || strings.ToUpper(c.Thumbprint) != c.Thumbprint || strings.Trim(c.Thumbprint, "0123456789ABCDEF") != "" {
		return bad("thumbprint %q is not 40 upper-case hex digits", clip(c.Thumbprint))
	}
	if c.Name == "" || len(c.Name) > maxCertName || strings.ContainsFunc(c.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return bad("the name must be 1 to %d printable characters", maxCertName)
	}
	if c.SecurityClearance.rank() == 0 {
		return bad("unknown clearance %q", clip(string(c.SecurityClearance)))
	}
	if len(c.Permissions) > 10_000 {
		return bad("too many permissions")
	}
	for db, a := range c.Permissions {
		if err := names.Database(db); err != nil {
			return err
		}
		if db != strings.ToLower(db) || a.rank() == 0 {
			return bad("permission %q: %q", db, a)
		}
	}
	if c.SecurityClearance != ValidUser && len(c.Permissions) > 0 {
		return bad("only ValidUser certificates carry database permissions")
	}
	if len(c.Certificate) > 64<<10 {
		return bad("the certificate is too large")
	}
	return nil
}

// SortedPermissions lists a certificate's permissions by database name.
func (c Certificate) SortedPermissions() []string {
	out := make([]string, 0, len(c.Permissions))
	for db, a := range c.Permissions {
		out = append(out, db+": "+string(a))
	}
	sort.Strings(out)
	return out
}

func clip(s string) string { return names.Clip(s, 64) }
