// Package client is the Go client of Rookery, a document database that
// speaks the part of RavenDB's HTTP protocol RavenDB clients use. It follows
// the shape of RavenDB's own clients: a DocumentStore per application and
// database, and short-lived Sessions (units of work) opened from it.
//
// # Getting started
//
//	store := client.NewDocumentStore([]string{"http://127.0.0.1:8080"}, "shop")
//	defer store.Close() // returns unused HiLo ids to the server
//
//	type Order struct {
//		ID    string // the document id, found by convention
//		Total float64
//	}
//
//	s := store.OpenSession()
//	o := &Order{Total: 12.5}
//	if err := s.Store(o); err != nil { ... } // o.ID is now "orders/1-A"
//	if err := s.SaveChanges(); err != nil { ... } // one POST bulk_docs
//
//	s2 := store.OpenSession()
//	var got *Order
//	found, err := s2.Load(o.ID, &got)     // or client.Load[Order](s2, o.ID)
//	got.Total = 20
//	_ = s2.Delete("orders/7-A")
//	err = s2.SaveChanges()                // the update and the delete, in one transaction
//
// # Ids
//
// Session.Store gives an entity without an id a HiLo id at once, with no
// request except when the current range of ids is used up: the store
// reserves ranges per collection (GET hilo/next) and shares them between
// all its sessions and goroutines. Ranges grow while they are used quickly,
// so a busy client needs about 15 range requests per million ids
// (DocumentStore.HiLoRequests counts them). Close gives back the unused rest.
//
// StoreWithID takes the id as given, except for two forms the server
// completes on SaveChanges, after which the entity's id field is updated:
// "companies|" takes the next identity ("companies/1"), and "companies/"
// (ending in the separator) gets a unique server-generated suffix. Entities
// without an id field or without a collection (maps) get a GUID id from the
// server.
//
// # Conventions
//
// The collection of a type is its plural name (Company → Companies, Person →
// People); the id prefix is the collection lower-cased unless it has two or
// more capitals (OrderLines stays). The id field is a string field named ID
// or Id, or tagged `rookery:"id"` or `json:"id"`. Every rule can be replaced
// through Conventions, before the store's first use. Documents carry
// @metadata with @collection and the Go type (Raven-Go-Type).
//
// # Change tracking and concurrency
//
// Loaded entities are tracked: SaveChanges sends those whose JSON differs
// from what was loaded, plus new and deleted ones, all in one request that
// the server applies atomically. With UseOptimisticConcurrency the session
// sends the change vector each document was loaded with (and "" for new
// ones, meaning "must not exist"); a conflicting write fails with a
// *ConcurrencyError:
//
//	var ce *client.ConcurrencyError
//	if errors.As(err, &ce) { ... reload and retry ... }
//
// # Network behaviour
//
// The RequestExecutor fetches the database topology (GET /topology) on first
// use and sends requests to its nodes, trying the next node (and then the
// store's other URLs) on network errors, 408, 410, 425 and 5xx. A database
// missing everywhere yields *DatabaseDoesNotExistError; a refusal of the
// client's identity (401, 403) yields *AuthorizationError at once, without
// trying other nodes; other server errors are *ServerError with the
// server's exception Type and Message. GET
// responses that carry an ETag are cached (bounded by
// Conventions.MaxHTTPCacheSize) and revalidated with If-None-Match, so a
// repeated load is answered by a bodiless 304.
//
// # Secured clusters (TLS and client certificates)
//
// A secured cluster (one set up with `studio setup`) serves https and knows
// its clients by the certificate they present. Give the store the client
// certificate and the cluster's CA before its first use:
//
//	cert, err := client.LoadCertificate("certs/admin.pem") // certificate + key, one PEM file
//	cas, err := client.LoadTrustedCAs("certs/ca.pem")
//	conv := client.DefaultConventions()
//	conv.Certificate = cert
//	conv.TrustedCAs = cas
//	store := client.NewDocumentStoreWithConventions([]string{
//		"https://10.0.0.1:8080", "https://10.0.0.2:8080", "https://10.0.0.3:8080"}, "shop", conv)
//
// Every request (topology, failover, operations) presents the certificate,
// and the nodes' certificates must chain to TrustedCAs (the system's roots
// when nil) and name the host of the URL. A certificate with http URLs is
// refused before any request, and so are URLs that mix http and https.
// Without a certificate, a secured node refuses everything but whoami.
//
// What a certificate may do is what the cluster registered for it
// (ClusterAdmin, Operator, or ValidUser with Read, ReadWrite or Admin per
// database). Refusals are errors that match ErrAuthorization:
//
//	var ae *client.AuthorizationError
//	if errors.Is(err, client.ErrAuthorization) { ... no certificate, an unknown one, or not allowed ... }
//	if errors.As(err, &ae) && ae.NoCertificate { ... the store presented none ... }
//
// so a read-only certificate loads, and its SaveChanges fails with an
// *AuthorizationError (status 403, Type "InvalidAuth").
//
// # Data subscriptions
//
// A subscription is a query over a collection ("from Orders where Total >
// 100") whose matching documents a worker receives in batches, in etag
// order, with the server keeping track of how far it got. Definitions are
// managed through DocumentStore.Subscriptions (Create, Update, Delete,
// State, List, DropConnection, Enable, Disable):
//
//	subs := store.Subscriptions()
//	name, err := subs.Create(ctx, client.SubscriptionOptions{Name: "BigOrders", Query: "from Orders where Total > 100"})
//
//	w := subs.GetWorker(client.WorkerOptions{Name: name})
//	err = w.Run(ctx, func(ctx context.Context, b *client.Batch) error {
//		for _, it := range b.Items {
//			var o Order
//			if err := it.Decode(&o); err != nil {
//				return err
//			}
//			... process o ...
//		}
//		return nil // acknowledges the batch
//	})
//
// The worker uses the same TCP protocol as RavenDB's clients: it asks a
// node where to connect (GET /info/remote-task/tcp, through the request
// executor, so with its failover), opens a TCP connection there (on
// Rookery, the HTTP port), and exchanges concatenated JSON messages: a
// header, the connection options, the server's connection status, then
// batches of Data messages ending with EndOfBatch, each answered by an
// Acknowledge once the handler returned nil and confirmed by the server.
//
// Delivery is at least once. A batch is acknowledged only after the
// handler returns nil; a handler error ends Run with that error, and a
// batch that was not acknowledged (handler error, cancelled context, lost
// connection) is delivered again to the next worker, so handlers should be
// idempotent. Run reconnects after WorkerOptions.RetryDelay on network
// errors and when the server asks for it, and returns a *SubscriptionError
// when the subscription is gone (ErrSubscriptionNotFound), held by another
// worker (ErrSubscriptionInUse, see the OpenIfFree, TakeOver and
// WaitForFree strategies) or closed, disabled or dropped
// (ErrSubscriptionClosed). With CloseWhenNoDocsLeft it returns nil once
// everything was processed.
//
// On a secured cluster the node's answer carries its certificate, and the
// worker connects with TLS, presents Conventions.Certificate, and accepts
// the node only if it presents exactly the certificate it announced (and,
// with TrustedCAs set, one that chains to them), as RavenDB's clients do.
// The worker's certificate needs Read access to the database; a refusal
// ends Run with an error matching ErrAuthorization (a *SubscriptionError
// with Status AuthorizationFailed when the TCP handshake refused it), with
// no retry.
//
// # Queries
//
// Session.Query (a collection), QueryIndex (an index by name) and RawQuery
// (RQL as written) build queries the way RavenDB's clients do; the RQL and
// its $p0, $p1 … parameters are exactly those the npm client sends for the
// same calls:
//
//	var orders []*Order // tracked entities, as with Load
//	var stats client.QueryStatistics
//	err := s.Query("Orders").
//		WhereEquals("Company", "companies/1").
//		WhereGreaterThan("Total", 100).
//		OrderByDescending("Total", client.OrderingDouble).
//		Take(10).
//		Statistics(&stats). // IndexName, TotalResults, IsStale, NodeTag …
//		ToList(&orders)
//	// from 'Orders' where Company = $p0 and Total > $p1 order by Total as double desc limit $p2, $p3
//
// Where clauses: WhereEquals (Exact for case-sensitive), WhereNotEquals,
// WhereGreaterThan(OrEqual), WhereLessThan(OrEqual), WhereBetween, WhereIn,
// ContainsAny, ContainsAll, WhereStartsWith, WhereEndsWith, WhereExists,
// WhereRegex, Search (SearchOr or SearchAnd), Boost, joined by AndAlso (the
// default) or OrElse, negated by Not, grouped by OpenSubclause and
// CloseSubclause; the field "id" is the document id. Then OrderBy and
// OrderByDescending (OrderingLong, OrderingDouble, OrderingAlphaNumeric),
// Skip, Take, SelectFields, Distinct, Include, GroupBy with SelectKey,
// SelectCount and SelectSum, and WaitForNonStaleResults. Terminal
// operations: ToList, First, Single, Count and Any. A repeated identical
// query is revalidated with If-None-Match and served from the HTTP cache
// on 304 (QueryStatistics.DurationInMs is then -1). Documents sent as
// includes load later without a request.
//
// # Indexes
//
// Static indexes are JavaScript, put with DocumentStore.PutIndexes:
//
//	_, err := store.PutIndexes(ctx, client.IndexDefinition{
//		Name: "Pets/ByOwner",
//		Maps: []string{`map('Pets', p => ({ Name: p.Name, OwnerName: load(p.OwnerId, 'People').Name }))`},
//	})
//	err = s.QueryIndex("Pets/ByOwner").WhereEquals("OwnerName", "Alice").WaitForNonStaleResults(0).ToList(&pets)
//
// GetIndexes, GetIndex, GetIndexNames, GetIndexStatistics, GetIndexErrors,
// GetIndexingStatus, DeleteIndex, ResetIndex, EnableIndex, DisableIndex,
// SetIndexPriority and SetIndexLock manage them.
// Session.WaitForIndexesAfterSaveChanges makes SaveChanges return only once
// the indexes have processed the batch. PatchByQuery and DeleteByQuery start
// long-running operations; Operation.WaitForCompletion polls their state.
//
// # Changes
//
// DocumentStore.Changes opens one websocket to a database's Changes API
// (/databases/{db}/changes, as RavenDB's clients do); its For… methods
// subscribe to notifications and return once the server confirmed the
// watch, so every later change is delivered:
//
//	ch, err := store.Changes(ctx, "") // the store's database
//	defer ch.Close()
//	sub, err := ch.ForDocumentsInCollection(ctx, "Orders")
//	for c := range sub.C { // DocumentChange{Type: "Put"|"Delete", ID, CollectionName, ChangeVector}
//		...
//	}
//	// sub.Err() says why C was closed
//
// ForDocument, ForDocumentsStartingWith, ForAllDocuments, ForIndex,
// ForAllIndexes (IndexChange: BatchCompleted, IndexAdded, IndexRemoved),
// ForOperation and ForAllOperations (OperationStatusChange) work the same
// way; Close on a subscription unwatches it. Each subscription buffers
// ChangesBuffer notifications; a reader that falls further behind loses its
// subscription (ErrChangesTooSlow), not the others'. The server drops a
// connection whose client does not read (a *ChangesClosedError, code 1008
// "too slow: …"), and one whose certificate lost its access ("no longer
// allowed"). The connection does not reconnect: when it ends every channel
// is closed and Err says why.
//
// # Maintenance
//
// DocumentStore also has CreateDatabase, DeleteDatabase, NextIdentity,
// SeedIdentity, GetIdentities, GetStatistics, GetDetailedStatistics and
// GetCollectionStatistics.
// These take a context; session methods use the session's context
// (SessionOptions.Context).
//
// # Patches and lazy loads
//
// Session.Patch(id, "Address.City", v), Increment(id, "Visits", 1) and
// PatchScript(id, PatchRequest{...}) are JavaScript patches sent with
// SaveChanges, in its transaction; a tracked entity is updated from the
// patched document. DocumentStore.Patch patches one document at once and
// reports Patched, NotModified, Created or DocumentDoesNotExist.
//
//	l, _ := s.LazyLoad("users/1", &u)      // nothing sent yet
//	m, _ := s.LazyLoad("users/2", &v)
//	found, err := l.Value()                // both loads, one POST multi_get
package client
