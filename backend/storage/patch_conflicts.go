package storage

// InConflict tells, inside the transaction, whether id has unresolved
// conflict versions (its document is then absent): a patch of such an id
// must fail with a conflict rather than see "no document".
func (tx *Tx) InConflict(id string) (bool, error) {
	if !tx.mayHaveConflicts() {
		return false, nil
	}
	versions, _, err := tx.fullConflicts(LowerID(id))
	return len(versions) > 0, err
}
