package guest

import "kubewasm.dev/guest/internal/wit"

// hostError converts the world's error variant; nil stays nil.
func hostError(e *wit.Error) error {
	if e == nil {
		return nil
	}
	return &Error{Kind: ErrorKind(e.Case), Code: int(e.Code), Reason: e.Reason, Message: e.Message}
}
