// Package pgtest starts throwaway PostgreSQL clusters for tests, from the
// server binaries of Debian's postgresql package: initdb into a temporary
// directory, then a postmaster listening only on a unix socket in that
// directory (no TCP port, so parallel test binaries never collide), with
// trust authentication and durability turned off.
//
// One cluster per test binary (Shared, stopped from TestMain) with a fresh
// database per test (CREATE DATABASE ... TEMPLATE template0, dropped at the
// test's cleanup) keeps tests fast: initdb and start cost one to four
// seconds (more on a loaded machine), a database some milliseconds. Start gives a test a cluster of its own.
//
// initdb and postgres refuse to run as root. As root (CI runs as root) the
// package runs both as the postgres user that Debian's package creates, or
// else nobody, through the child process's credentials, with the temporary
// directory handed to that user; no su, sudo or runuser is needed. The
// postmaster is the test binary's child with a parent-death signal (not
// pg_ctl start's daemon), so a test binary that dies or hits its -timeout
// takes its clusters with it; Stop sends it SIGQUIT, which is what
// pg_ctl stop -m immediate sends. The directory of a killed test binary's
// cluster stays behind; the next start removes such directories once they
// are an hour old and their postmaster is gone.
//
// The directory is the package's own (os.MkdirTemp under the system's
// temporary directory, or /tmp when that path is long) rather than
// t.TempDir: a unix socket's path must fit in about 100 bytes, which a
// test's name can exceed, and a shared cluster outlives any one test.
//
// Outside CI a test skips with a message when PostgreSQL is not installed;
// under CI (CI=true) it fails, so a missing install step cannot turn into
// silently skipped tests. .ci/run installs the package.
//
// It must not be imported by non-test code.
package pgtest
