package api_test

import (
	"testing"
)

// Subscription definitions through the endpoints the npm client uses:
// create (named and unnamed), list, state, update, drop, delete; bad queries
// get a 400 with the position; unknown names a 404.
func TestSubscriptionDefinitions(t *testing.T) {
	h := newServer(t)
	check(t, h, []step{
		{name: "create db", method: "PUT", url: "/admin/databases?name=s", body: `{"DatabaseName":"s"}`, status: 201},
		{name: "create", method: "PUT", url: "/databases/s/subscriptions?raft-request-id=1", body: `{"Query":"from Orders where Total > 10","Name":"OrdersSub"}`, status: 201, contains: []string{`"Name":"OrdersSub"`, `"RaftCommandIndex":`}},
		{name: "create unnamed", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from 'Orders' as doc","ChangeVector":"LastDocument","MentorNode":"A"}`, status: 201},
		{name: "duplicate", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from Orders","Name":"orderssub"}`, status: 409, contains: []string{"already exists"}},
		{name: "bad query", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from Orders where Total >","Name":"x"}`, status: 400, errType: "Raven.Client.Exceptions.BadRequestException", contains: []string{"position 25", "expected a value"}},
		{name: "index query", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":"from index 'X'","Name":"x"}`, status: 400, contains: []string{"not an index"}},
		{name: "bad body", method: "PUT", url: "/databases/s/subscriptions", body: `{"Query":`, status: 400},
		{name: "list", method: "GET", url: "/databases/s/subscriptions?start=0&pageSize=10", status: 200, contains: []string{`"SubscriptionName":"OrdersSub"`, `"Query":"from Orders where Total \u003e 10"`, `"MentorNode":"A"`, `"ArchivedDataProcessingBehavior":"ExcludeArchived"`}},
		{name: "paged", method: "GET", url: "/databases/s/subscriptions?start=1&pageSize=10", status: 200, match: nil, contains: []string{`"Query":"from 'Orders' as doc"`}},
		{name: "state", method: "GET", url: "/databases/s/subscriptions/state?name=OrdersSub", status: 200, contains: []string{`"SubscriptionName":"OrdersSub"`, `"Disabled":false`, `"ChangeVectorForNextBatchStartingPoint":null`}},
		{name: "state unknown", method: "GET", url: "/databases/s/subscriptions/state?name=nope", status: 404},
		{name: "state no name", method: "GET", url: "/databases/s/subscriptions/state", status: 400},
		{name: "update", method: "POST", url: "/databases/s/subscriptions/update", body: `{"Name":"OrdersSub","Query":"from Orders where Total > 20","Disabled":true,"ChangeVector":"DoNotChange"}`, status: 200, contains: []string{`"Name":"OrdersSub"`}},
		{name: "updated", method: "GET", url: "/databases/s/subscriptions/state?name=orderssub", status: 200, contains: []string{`Total \u003e 20`, `"Disabled":true`}},
		{name: "partial update", method: "POST", url: "/databases/s/subscriptions/update", body: `{"Name":"OrdersSub","Query":"from Orders where Total > 30"}`, status: 200},
		{name: "still disabled", method: "GET", url: "/databases/s/subscriptions/state?name=OrdersSub", status: 200, contains: []string{`Total \u003e 30`, `"Disabled":true`}},
		{name: "update bad query", method: "POST", url: "/databases/s/subscriptions/update", body: `{"Name":"OrdersSub","Query":"form Orders"}`, status: 400, contains: []string{"position 0"}},
		{name: "drop", method: "POST", url: "/databases/s/subscriptions/drop?name=OrdersSub", status: 204},
		{name: "drop unknown", method: "POST", url: "/databases/s/subscriptions/drop?name=nope", status: 404},
		{name: "delete", method: "DELETE", url: "/databases/s/subscriptions?taskName=OrdersSub&raft-request-id=2", status: 204},
		{name: "deleted", method: "GET", url: "/databases/s/subscriptions/state?name=OrdersSub", status: 404},
		{name: "delete unknown", method: "DELETE", url: "/databases/s/subscriptions?taskName=OrdersSub", status: 404},
	})
}
