//go:build race

package replay_test

// raceDetector: the race detector slows the engine and the emulator
// several times over, so bounds of wall time are scaled by stopGrace.
const raceDetector = true
