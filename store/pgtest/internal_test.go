package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestFindBinDir(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no initdb on PATH
	root := t.TempDir()
	if _, err := findBinDirIn(root); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("nothing installed: %v, want ErrNotInstalled", err)
	}
	for _, v := range []string{"9", "16", "15"} {
		bin := filepath.Join(root, v, "bin")
		os.MkdirAll(bin, 0o755)
		os.WriteFile(filepath.Join(bin, "initdb"), nil, 0o755)
	}
	os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755) // a client-only install: no initdb
	dir, err := findBinDirIn(root)
	if err != nil || dir != filepath.Join(root, "16", "bin") {
		t.Fatalf("found %q, %v; want the newest server, 16 (by number, not by name)", dir, err)
	}

	// initdb on PATH wins when postgres sits next to it.
	onPath := t.TempDir()
	for _, name := range []string{"initdb", "postgres"} {
		os.WriteFile(filepath.Join(onPath, name), []byte("#!/bin/sh\n"), 0o755)
	}
	t.Setenv("PATH", onPath)
	if dir, err := findBinDirIn(root); err != nil || dir != onPath {
		t.Fatalf("found %q, %v; want %s from PATH", dir, err, onPath)
	}
}

// recorder is a testing.TB that records whether a helper skipped or failed.
type recorder struct {
	testing.TB
	verdict string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	if r.verdict == "" {
		r.verdict = "skip: " + fmt.Sprintf(format, args...)
	}
}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.verdict == "" {
		r.verdict = "fail: " + fmt.Sprintf(format, args...)
	}
}

func TestMissingPostgresSkipsOutsideCIAndFailsUnderCI(t *testing.T) {
	for _, tc := range []struct {
		ci   string
		err  error
		want string
	}{
		{"", ErrNotInstalled, "skip"},
		{"false", ErrNotInstalled, "skip"},
		{"true", ErrNotInstalled, "fail"},
		{"", errors.New("initdb: exit status 1"), "fail"}, // installed but broken: never hidden
	} {
		t.Setenv("CI", tc.ci)
		r := &recorder{TB: t}
		failOrSkip(r, tc.err)
		if len(r.verdict) < 4 || r.verdict[:4] != tc.want {
			t.Errorf("CI=%q, %v: %q, want %s", tc.ci, tc.err, r.verdict, tc.want)
		}
	}
}

func TestSweepRemovesOnlyDeadOldClusters(t *testing.T) {
	base := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	mk := func(name, pid string, mtime time.Time) string {
		dir := filepath.Join(base, name)
		os.MkdirAll(filepath.Join(dir, "data"), 0o700)
		if pid != "" {
			os.WriteFile(filepath.Join(dir, "data", "postmaster.pid"), []byte(pid+"\n/some/data\n"), 0o600)
		}
		os.Chtimes(dir, mtime, mtime)
		return dir
	}
	// A process that has exited: its pid is free (pids are not reused this fast).
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := strconv.Itoa(dead.Process.Pid)
	gone := []string{mk(dirPrefix+"dead", deadPid, old), mk(dirPrefix+"nopid", "", old)}
	kept := []string{
		mk(dirPrefix+"live", strconv.Itoa(os.Getpid()), old),
		mk(dirPrefix+"young", deadPid, time.Now()),
		mk("someone-else", deadPid, old),
	}
	sweep(base, time.Hour)
	for _, dir := range gone {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s not swept: %v", filepath.Base(dir), err)
		}
	}
	for _, dir := range kept {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s swept: %v", filepath.Base(dir), err)
		}
	}
}
