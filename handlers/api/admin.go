package api

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/auth"
	"github.com/rookerydb/rookery/backend/cluster"
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/indexes"
)

// topology serves GET /topology?name=db: every member of the database with
// its URL. An unknown database gets the 503 form with Database-Missing that
// the client turns into DatabaseDoesNotExistException.
func (a *API) topology(c echo.Context) error {
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	rec, ok := a.Cluster.Database(name)
	if !ok {
		c.Response().Header().Set("Database-Missing", name)
		return writeJSON(c, http.StatusServiceUnavailable, map[string]string{
			"Type":    "Error",
			"Message": "Database " + name + " wasn't found",
		})
	}
	urls := a.nodeURLs()
	nodes := []map[string]string{}
	// This node first: a client that asked here prefers it.
	order := append([]string{}, rec.Members...)
	sort.SliceStable(order, func(i, j int) bool { return order[i] == a.NodeTag && order[j] != a.NodeTag })
	_, damagedHere := a.Catalog.DamageOf(name)
	for _, m := range order {
		if urls[m] == "" || (m == a.NodeTag && damagedHere) {
			continue // a damaged copy is not offered to clients
		}
		nodes = append(nodes, map[string]string{"Url": urls[m], "ClusterTag": m, "ServerRole": "Member", "Database": rec.Name})
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Promotables": []any{}, "Nodes": nodes, "Etag": a.Cluster.TopologyEtag()})
}

func (a *API) nodeURLs() map[string]string {
	urls := map[string]string{}
	for _, n := range a.Cluster.Nodes() {
		urls[n.Tag] = n.URL
	}
	if urls[a.NodeTag] == "" {
		urls[a.NodeTag] = a.URL()
	}
	return urls
}

func raftState(s string) string {
	switch s {
	case "leader":
		return "Leader"
	case "follower":
		return "Follower"
	case "candidate":
		return "Candidate"
	}
	return "Passive"
}

// clusterTopology serves GET /cluster/topology: the real cluster.
func (a *API) clusterTopology(c echo.Context) error {
	st := a.Cluster.Status()
	urls := a.nodeURLs()
	// The Raft configuration decides who is in the cluster; the state
	// machine supplies the URLs.
	all := map[string]string{}
	members := map[string]string{}
	watchers := map[string]string{}
	for _, sv := range st.Servers {
		all[sv.Tag] = urls[sv.Tag]
		if sv.Suffrage == "voter" {
			members[sv.Tag] = urls[sv.Tag]
		} else {
			watchers[sv.Tag] = urls[sv.Tag]
		}
	}
	etag := a.Cluster.TopologyEtag()
	return writeJSON(c, http.StatusOK, map[string]any{
		"Topology": map[string]any{
			"TopologyId":  "rookery",
			"AllNodes":    all,
			"Members":     members,
			"Promotables": map[string]string{},
			"Watchers":    watchers,
			"LastNodeId":  a.NodeTag,
			"Etag":        etag,
		},
		"Etag":         etag,
		"Leader":       st.LeaderTag,
		"NodeTag":      a.NodeTag,
		"CurrentState": raftState(st.State),
		"CurrentTerm":  st.Term,
		"Status":       map[string]any{},
	})
}

func (a *API) nodeInfo(c echo.Context) error {
	st := a.Cluster.Status()
	return writeJSON(c, http.StatusOK, map[string]any{
		"NodeTag":       a.NodeTag,
		"TopologyId":    "rookery",
		"ServerRole":    "Member",
		"CurrentState":  raftState(st.State),
		"ClusterStatus": "Joined",
		"HasFixedPort":  true,
	})
}

func (a *API) buildVersion(c echo.Context) error {
	return writeJSON(c, http.StatusOK, map[string]any{
		"BuildVersion": 71000, "ProductVersion": "7.1", "CommitHash": "rookery", "FullVersion": ServerVersion,
	})
}

// listDatabases serves GET /databases[?namesOnly=true].
func (a *API) listDatabases(c echo.Context) error {
	names := auth.Readable(c.Request().Context(), a.Catalog.Names())
	start, pageSize, err := pagingWith(c, int64(len(names)))
	if err != nil {
		return err
	}
	start = min(start, len(names))
	end := min(len(names), start+pageSize)
	names = names[start:end]
	if namesOnly, _ := boolParam(c, "namesOnly"); namesOnly {
		return writeJSON(c, http.StatusOK, map[string]any{"Databases": names})
	}
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"Name": n, "Disabled": false, "NodesTopology": map[string]any{"Members": []map[string]string{{"NodeTag": a.NodeTag, "NodeUrl": a.URL()}}}})
	}
	return writeJSON(c, http.StatusOK, map[string]any{"Databases": out})
}

func (a *API) record(d cluster.Database) map[string]any {
	rf := d.ReplicationFactor
	if rf == 0 {
		rf = len(d.Members)
	}
	return map[string]any{
		"DatabaseName":           d.Name,
		"IdentityPartsSeparator": d.Separator,
		"Disabled":               false,
		"Encrypted":              false,
		"Settings":               map[string]string{},
		"Topology": map[string]any{
			"Members": d.Members, "Promotables": []string{}, "Rehabs": []string{}, "ReplicationFactor": rf,
		},
	}
}

// createDatabase serves PUT /admin/databases?name=: the body is a
// DatabaseRecord; only its name matters on a single node.
func (a *API) createDatabase(c echo.Context) error {
	var rec struct {
		DatabaseName string
		// IdentityPartsSeparator is Rookery's database setting for the
		// separator of identity and server-side ids ("/" by default).
		IdentityPartsSeparator string
		// ReplicationFactor: how many nodes hold it; all nodes when 0.
		ReplicationFactor int
		// Settings are RavenDB's per-database configuration; the
		// "Indexing.*" keys of the auto-index cleanup are kept.
		Settings map[string]string
	}
	raw, err := readBody(c, 1<<20, "Invalid database record")
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &rec); err != nil {
			return dberr.New(dberr.BadRequest, "Invalid database record: %v", err)
		}
	}
	name := rec.DatabaseName
	if name == "" {
		name = c.QueryParam("name")
	}
	if name == "" {
		return dberr.New(dberr.BadRequest, "The database name is required (DatabaseName in the body or ?name=)")
	}
	if q := c.QueryParam("name"); q != "" && !strings.EqualFold(q, name) {
		return dberr.New(dberr.BadRequest, "The name in the query string (%s) and in the record (%s) differ", q, name)
	}
	// The replication factor comes from the record's body only. The npm
	// client puts ?replicationFactor=1 on every create; honouring it would
	// make every client-created database single-node, where Rookery's default
	// is every node.
	rf := rec.ReplicationFactor
	d := cluster.Database{Name: name, Members: a.membersFor(rf), Separator: rec.IdentityPartsSeparator}
	if rf > 0 && rf < len(a.Cluster.Nodes()) {
		d.ReplicationFactor = rf
	}
	ix := indexingSettings(rec.Settings)
	if _, err := indexes.ParseConfig(ix); err != nil {
		return err
	}
	if err := a.Catalog.CreateInCluster(c.Request().Context(), a.Cluster, d, a.NodeTag); err != nil {
		return err
	}
	if len(ix) > 0 {
		b, _ := json.Marshal(ix)
		if _, err := a.Cluster.SetSetting(c.Request().Context(), name, indexes.SettingsKey, b); err != nil {
			return err
		}
	}
	created, _ := a.Cluster.Database(name)
	urls := a.nodeURLs()
	var addedTo []string
	for _, m := range created.Members {
		addedTo = append(addedTo, urls[m])
	}
	return writeJSON(c, http.StatusCreated, map[string]any{
		"RaftCommandIndex": a.Cluster.Status().CommitIndex,
		"Name":             created.Name,
		"Topology":         a.record(created)["Topology"],
		"NodesAddedTo":     addedTo,
	})
}

// deleteDatabases serves DELETE /admin/databases. Deleting a database that
// does not exist is not an error: the end state is the one asked for.
func (a *API) deleteDatabases(c echo.Context) error {
	var body struct {
		DatabaseNames []string
		HardDelete    bool
	}
	if err := readJSON(c, 1<<20, &body, `Invalid body: expected {"DatabaseNames":[...]}`); err != nil {
		return err
	}
	if len(body.DatabaseNames) == 0 {
		return dberr.New(dberr.BadRequest, "DatabaseNames is empty")
	}
	// Every name must exist before any is deleted: a typo deletes nothing
	// and says so.
	for _, n := range body.DatabaseNames {
		if _, ok := a.Cluster.Database(n); !ok {
			return &dberr.Error{Kind: dberr.UnknownDatabase, Database: n, Msg: "Database '" + n + "' does not exist; nothing was deleted."}
		}
	}
	for _, n := range body.DatabaseNames {
		if err := a.Catalog.DeleteInCluster(c.Request().Context(), a.Cluster, n); err != nil && !dberr.Is(err, dberr.DatabaseMissing) {
			return err
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"RaftCommandIndex": 1, "PendingDeletes": []string{}})
}

// databaseRecord serves GET /admin/databases?name=.
func (a *API) databaseRecord(c echo.Context) error {
	name, err := requiredParam(c, "name")
	if err != nil {
		return err
	}
	rec, ok := a.Cluster.Database(name)
	if !ok {
		return c.NoContent(http.StatusNotFound)
	}
	return writeJSON(c, http.StatusOK, a.record(rec))
}

// indexingSettings keeps the "Indexing.*" keys of a database record's
// settings.
func indexingSettings(all map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range all {
		if strings.HasPrefix(k, "Indexing.") {
			out[k] = v
		}
	}
	return out
}
