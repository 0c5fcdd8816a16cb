package smuggler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/rookerydb/rookery/backend/smuggler/dump"
	"github.com/rookerydb/rookery/backend/storage"
)

// exportAttachments writes the attachment streams of a document just
// before it (RavenDB's layout), and returns the body to write: without its
// attachment list when attachments are not exported.
func exportAttachments(ctx context.Context, db *storage.DB, o Options, dw *dump.Writer, res *Result, it *storage.Item) ([]byte, error) {
	if !bytes.Contains(it.Body, []byte(`"@attachments"`)) {
		return it.Body, nil
	}
	refs, err := storage.AttachmentsOf(it.Body)
	if err != nil || len(refs) == 0 {
		return it.Body, err
	}
	if !o.Has(TypeAttachments) {
		return storage.WithAttachments(it.Body, nil)
	}
	for _, r := range refs {
		ok, err := db.HasContent(ctx, r.Hash)
		if err != nil {
			return nil, err
		}
		if !ok {
			res.message("WARN", "document %s: the content of attachment %q (%s) is not on this node; the dump lists it without its bytes", it.ID, r.Name, r.Hash)
			continue
		}
		tag := storage.LowerID(it.ID) + "|d|" + r.Name + "|" + r.Hash + "|" + r.ContentType
		rc := db.OpenContent(ctx, r.Hash)
		err = dw.Attachment(r.Hash, tag, r.Size, rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		res.add(func() { res.Documents.Attachments.ReadCount++ })
	}
	return it.Body, nil
}

// importAttachment stores an attachment stream of a dump: its bytes, in
// chunks, as content the documents that follow refer to by hash.
func (imp *importer) importAttachment(it *dump.Item) error {
	r := imp.res
	r.add(func() { r.Documents.Attachments.ReadCount++; start(&r.Documents.Attachments) })
	if !imp.o.Has(TypeAttachments) {
		r.add(func() { r.Documents.Attachments.Skipped = true })
		return nil
	}
	var h dump.AttachmentHeader
	if err := json.Unmarshal(it.JSON, &h); err != nil {
		return err
	}
	sum := sha256.Sum256(it.Binary)
	if got := base64.StdEncoding.EncodeToString(sum[:]); got != h.Hash {
		r.add(func() { r.Documents.Attachments.ErroredCount++ })
		imp.res.message("WARN", "attachment stream %s: its bytes hash to %s; not imported", h.Hash, got)
		return nil
	}
	size := int64(len(it.Binary))
	for pos := int64(0); pos < size || pos == 0; pos += storage.AttachmentChunkSize {
		end := min(pos+storage.AttachmentChunkSize, size)
		imp.add(storage.Item{Kind: storage.KindAttachment, Type: "Put", ID: h.Hash,
			Body: storage.AttachmentChunkBody(nil, pos, size, it.Binary[pos:end])})
		if size == 0 {
			break
		}
	}
	return nil
}

// docAttachments puts a dump document's @attachments (which document.Parse
// drops: the server owns them) back into its stored body.
func (imp *importer) docAttachments(raw, body []byte) ([]byte, error) {
	if !bytes.Contains(raw, []byte(`"@attachments"`)) || !imp.o.Has(TypeAttachments) {
		return body, nil
	}
	var d struct {
		Metadata struct {
			Attachments []storage.AttachmentRef `json:"@attachments"`
		} `json:"@metadata"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("@attachments: %w", err)
	}
	if len(d.Metadata.Attachments) == 0 {
		return body, nil
	}
	return storage.WithAttachments(body, d.Metadata.Attachments)
}
