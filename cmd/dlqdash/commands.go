package main

import (
	"strings"
)

// usageError is a bad command line: run prints it as one line and exits 2.
type usageError struct {
	msg     string
	command string // for the hint; empty for the top level
}

func (e *usageError) Error() string {
	return e.msg + "; run '" + strings.TrimSpace("dlqdash "+e.command) + " -h' for help"
}

// helpRequest is returned when -h was asked for: run prints the text to
// stdout and exits 0.
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }

type command struct {
	name    string
	summary string
	flags   func(*flagSet)
}

var commands = []command{
	{"demo", "run the dashboard against the embedded Service Bus emulator: two namespaces (prod-eu, prod-us) with seeded, failing traffic", dashboardFlags},
	{"serve", "run the dashboard against the namespace in " + envConnectionString + ", or the namespaces of --config", dashboardFlags},
	{"emulator", "run the Service Bus emulator alone", emulatorFlags},
	{"healthcheck", "GET a running dashboard's /healthz; exit 0 if it answers 200 (for container health checks)", healthcheckFlags},
	{"export", "write cataloged messages to stdout as JSON lines or CSV (safe while serve runs on the same database)", exportFlags},
	// Two-word commands: a group name, then the subcommand.
	{"audit verify", "check the audit trail's hash chain; exit 0 if intact, 1 naming the first entry that is not", auditVerifyFlags},
	{"audit export", "write the audit trail to stdout as JSON lines or CSV (safe while serve runs on the same database)", auditExportFlags},
	{"audit head", "print the audit trail's newest entry as SEQ:HASH, to keep elsewhere for audit verify --expect-head", auditHeadFlags},
	{"token create", "create an API token (Authorization: Bearer) with a role; prints it once, alone on the last line", tokenCreateFlags},
	{"token list", "list the API tokens: name, role, state, created, expires, last used", tokenListFlags},
	{"token revoke", "revoke an API token by name; it stops working at its next request", tokenRevokeFlags},
	{"store copy", "copy a catalog (a SQLite file) into a PostgreSQL database: streams, shows progress, continues where a cut-off copy stopped, verifies the counts", storeCopyFlags},
}

// subcommands lists the subcommands of a two-word command group ("audit"):
// "verify", "export"; none for other names.
func subcommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if g, sub, ok := strings.Cut(c.name, " "); ok && g == group {
			subs = append(subs, sub)
		}
	}
	return subs
}

// orList writes names as "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func isHelpArg(a string) bool {
	switch a {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// commandNames lists the commands for error messages: "a, b or c".
func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return orList(names)
}
