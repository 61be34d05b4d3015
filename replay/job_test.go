package replay

import "testing"

// The transitions a person may ask for, by status: the engine's Pause,
// Resume and Cancel change a job's status only from these, and the pages
// show a control only where CanPause, CanResume or CanCancel says so.
func TestStatusTransitions(t *testing.T) {
	for _, tt := range []struct {
		s                     Status
		pause, resume, cancel bool
		finished              bool
	}{
		{StatusQueued, true, false, true, false},
		{StatusRunning, true, false, true, false},
		{StatusPaused, false, true, true, false},
		{StatusCancelling, false, false, false, false},
		{StatusCancelled, false, false, false, true},
		{StatusCompleted, false, false, false, true},
		{StatusFailed, false, false, false, true},
	} {
		if tt.s.CanPause() != tt.pause || tt.s.CanResume() != tt.resume || tt.s.CanCancel() != tt.cancel || tt.s.Finished() != tt.finished {
			t.Errorf("%s: pause %v resume %v cancel %v finished %v, want %v %v %v %v", tt.s,
				tt.s.CanPause(), tt.s.CanResume(), tt.s.CanCancel(), tt.s.Finished(), tt.pause, tt.resume, tt.cancel, tt.finished)
		}
	}
}
