package document

import (
	"fmt"

	"github.com/rookerydb/rookery/backend/dberr"
)

// TooLarge explains a document over the size limit to whoever sent it (a
// client, or the studio's editor): a dberr.TooLarge (413) naming the limit
// and its flag, and that nothing was stored. id may be "".
func TooLarge(se *SizeError, id string) error {
	what := "The document"
	if id != "" {
		what = fmt.Sprintf("The document %q", id)
	}
	return &dberr.Error{Kind: dberr.TooLarge, Err: se, Msg: fmt.Sprintf("%s is larger than %s, the largest document this server accepts (--max-document-size). Nothing was stored.", what, FormatBytes(se.Max))}
}

// FormatBytes writes a size the way the flags take it (32MiB).
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
