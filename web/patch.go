package web

import "github.com/rookerydb/rookery/handlers/api"

// DefaultMaxMultiGet is --max-multi-get's default: the most inner requests
// of one multi_get.
const DefaultMaxMultiGet = api.DefaultMaxMultiGet
