package api

import (
	"net/http"
	"runtime"
	"sort"

	"github.com/dustin/go-humanize"
	"github.com/labstack/echo/v4"

	"github.com/rookerydb/rookery/backend/document"
	"github.com/rookerydb/rookery/backend/storage"
)

// stats serves GET /stats (DatabaseStatistics).
func (a *API) stats(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	out, err := databaseStats(c, db)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, out)
}

// detailedStats serves GET /stats/detailed (DetailedDatabaseStatistics):
// everything /stats says, and the counts of what Rookery does not keep
// yet as zeros.
func (a *API) detailedStats(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	out, err := databaseStats(c, db)
	if err != nil {
		return err
	}
	identities := 0
	if a.Cluster != nil {
		identities = len(a.Cluster.Identities(db.Name()))
	}
	out["CountOfIdentities"] = identities
	out["CountOfCompareExchange"] = 0
	out["CountOfCompareExchangeTombstones"] = 0
	out["CountOfTimeSeriesDeletedRanges"] = 0
	return writeJSON(c, http.StatusOK, out)
}

func databaseStats(c echo.Context, db *storage.DB) (map[string]any, error) {
	s := db.Stats()
	conflictedDocs, conflictRows, err := db.ConflictCounts(c.Request().Context())
	if err != nil {
		return nil, err
	}
	attachments, uniqueAttachments, err := db.AttachmentCounts(c.Request().Context())
	if err != nil {
		return nil, err
	}
	var lastWrite any
	if !s.LastWrite.IsZero() {
		lastWrite = document.FormatTime(s.LastWrite)
	}
	return map[string]any{
		"LastDocEtag":                              s.LastEtag,
		"LastDatabaseEtag":                         s.LastEtag,
		"CountOfIndexes":                           0,
		"CountOfDocuments":                         s.Documents,
		"CountOfRevisionDocuments":                 revisionsTotal(c, db),
		"CountOfDocumentsConflicts":                conflictedDocs,
		"CountOfTombstones":                        s.Tombstones,
		"CountOfConflicts":                         conflictRows,
		"CountOfAttachments":                       attachments,
		"CountOfUniqueAttachments":                 uniqueAttachments,
		"CountOfCounterEntries":                    0,
		"CountOfTimeSeriesSegments":                0,
		"CountOfCollections":                       len(s.Collections),
		"Indexes":                                  []any{},
		"DatabaseChangeVector":                     s.ChangeVector,
		"DatabaseId":                               s.DatabaseID,
		"Is64Bit":                                  runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64",
		"Pager":                                    "SQLite",
		"LastIndexingTime":                         nil,
		"LastWriteTime":                            lastWrite,
		"SizeOnDisk":                               map[string]any{"HumaneSize": humanize.IBytes(uint64(s.SizeOnDisk)), "SizeInBytes": s.SizeOnDisk},
		"TempBuffersSizeOnDisk":                    map[string]any{"HumaneSize": "0 B", "SizeInBytes": 0},
		"NumberOfTransactionMergerQueueOperations": 0,
	}, nil
}

// collectionStats serves GET /collections/stats.
func (a *API) collectionStats(c echo.Context) error {
	db, err := a.db(c)
	if err != nil {
		return err
	}
	s := db.Stats()
	conflictedDocs, conflictRows, err := db.ConflictCounts(c.Request().Context())
	if err != nil {
		return err
	}
	sort.Slice(s.Collections, func(i, j int) bool { return s.Collections[i].Name < s.Collections[j].Name })
	colls := map[string]int64{}
	for _, col := range s.Collections {
		if col.Docs > 0 {
			colls[col.Name] = col.Docs
		}
	}
	return writeJSON(c, http.StatusOK, map[string]any{
		"CountOfDocuments":          s.Documents,
		"CountOfConflicts":          conflictRows,
		"CountOfDocumentsConflicts": conflictedDocs,
		"CountOfTombstones":         s.Tombstones,
		"Collections":               colls,
	})
}
