package main

import (
	"flag"
	"io"
	"strings"

	"github.com/dlqdash/dlqdash/store"
)

// flagSet is a flag.FlagSet whose string flags default to an environment
// variable, and which remembers them for the help text.
type flagSet struct {
	fs     *flag.FlagSet
	getenv func(string) string
	specs  []flagSpec
	values map[string]*string
	bools  map[string]*bool
	// envErr is the first environment variable that could not be read
	// (boolEnv); parseConfig reports it.
	envErr string
}

type flagSpec struct {
	name, env, def, meaning string
}

func (f *flagSet) str(name, env, def, meaning string) {
	v := def
	if env != "" {
		if e := f.getenv(env); e != "" {
			v = e
		}
	}
	f.values[name] = f.fs.String(name, v, meaning)
	f.specs = append(f.specs, flagSpec{name, env, def, meaning})
}

// source names where a value came from, for error messages.
func (f *flagSet) source(name string) string {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	for _, s := range f.specs {
		if s.name == name && !set && s.env != "" && f.getenv(s.env) != "" {
			return s.env
		}
	}
	return "--" + name
}

func logFlags(f *flagSet) {
	f.str("log-level", envLogLevel, defaultLogLevel, "log level: debug, info, warn or error")
	f.str("log-format", envLogFormat, defaultLogFormat, "log format: text or json")
}

func newFlagSet(c command, getenv func(string) string) *flagSet {
	fs := flag.NewFlagSet("dlqdash "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &flagSet{fs: fs, getenv: getenv, values: map[string]*string{}, bools: map[string]*bool{}}
	c.flags(f)
	return f
}

// get is the value of the string flag name (after the environment and
// defaults).
func (f *flagSet) get(name string) string { return *f.values[name] }

// db is the --db flag: a SQLite file's path or a PostgreSQL URL, not
// empty. Without --db, DLQDASH_DATABASE_URL names a PostgreSQL database
// (the variable's usual name on platforms that provision one); it and
// DLQDASH_DB together are ambiguous.
func (f *flagSet) db(bad func(string, ...any) error) (string, error) {
	db := strings.TrimSpace(f.get("db"))
	source := f.source("db")
	given := false
	f.fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "db" })
	if u := strings.TrimSpace(f.getenv(envDatabaseURL)); u != "" && !given {
		if source == envDB {
			return "", bad("both %s and %s are set: keep the one that names the database", envDB, envDatabaseURL)
		}
		if !store.IsPostgresURL(u) {
			return "", bad("%s must be a postgres:// or postgresql:// URL (a SQLite file goes in %s)", envDatabaseURL, envDB)
		}
		return u, nil
	}
	if db == "" {
		return "", bad("empty database path from %s", source)
	}
	return db, nil
}

// addr is the address flag name, checked (validateAddr).
func (f *flagSet) addr(name string, bad func(string, ...any) error) (string, error) {
	a := f.get(name)
	if err := validateAddr(a); err != nil {
		return "", bad("invalid address %q from %s: %v", a, f.source(name), err)
	}
	return a, nil
}
