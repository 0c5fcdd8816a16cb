package batch

import (
	"github.com/rookerydb/rookery/backend/dberr"
	"github.com/rookerydb/rookery/backend/storage"
)

// executeAttachment runs an AttachmentPUT or AttachmentDELETE command in
// the batch's transaction.
func executeAttachment(tx *storage.Tx, c Command) (Result, error) {
	if c.Type == AttachmentDelete {
		info, _, err := tx.DeleteAttachment(c.ID, c.Name, c.ChangeVector)
		if err != nil {
			return Result{}, err
		}
		return Result{Type: AttachmentDelete, ID: info.ID, ChangeVector: info.ChangeVector,
			Attachment: &storage.AttachmentInfo{AttachmentRef: storage.AttachmentRef{Name: c.Name}, DocumentID: info.ID, ChangeVector: info.ChangeVector}}, nil
	}
	if c.Attachment == nil {
		return Result{}, dberr.New(dberr.BadRequest, "AttachmentPUT of '%s' on '%s' has no content: the request must be multipart, one part per AttachmentPUT command, in order", c.Name, c.ID)
	}
	info, err := tx.PutAttachment(c.ID, c.Name, c.ContentType, c.Attachment, c.ChangeVector)
	if err != nil {
		return Result{}, err
	}
	return Result{Type: AttachmentPut, ID: info.DocumentID, ChangeVector: info.ChangeVector, Attachment: &info}, nil
}

// RemoveStaged deletes the staged contents of a batch's commands.
func RemoveStaged(cmds []Command) {
	for _, c := range cmds {
		c.Attachment.Remove()
	}
}
