package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the layering of docs/architecture.md's dependency
// section: dependencies point inward, and only the packages meant to touch
// SQLite, HTTP or HTML do.
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/dlqdash/dlqdash/"
	forbidden := map[string][]string{
		"store":  {"net/http", "github.com/a-h/templ", mod + "web", mod + "views", "github.com/Azure/"},
		"views":  {"database/sql", "modernc.org/sqlite", mod + "store", mod + "web", "github.com/Azure/"},
		"web":    {"database/sql", "modernc.org/sqlite", "github.com/Azure/", mod + "servicebus"},
		"static": {mod + "store", mod + "web", mod + "views", "net/http"},
		"audit":  {"database/sql", "modernc.org/sqlite", "net/http", "github.com/Azure/", mod + "store", mod + "web", mod + "servicebus"},
		"auth":   {"database/sql", "modernc.org/sqlite", "net/http", "github.com/Azure/", mod + "store", mod + "web", mod + "views", mod + "servicebus"},
		"dlq":    {"database/sql", "modernc.org/sqlite", "net/http", "github.com/Azure/", mod + "store", mod + "web", mod + "servicebus", mod + "emulator", "github.com/a-h/templ"},
		"replay": {"database/sql", "modernc.org/sqlite", "net/http", "github.com/Azure/", mod + "store", mod + "web", mod + "views", mod + "servicebus", mod + "emulator", "github.com/a-h/templ"},
		// servicebus is production code: it never imports the emulator or the demo.
		"servicebus": {mod + "emulator", mod + "demo", mod + "store", mod + "web", mod + "views"},
		// The test credential signs its own tokens; the emulator checks them with its own code.
		"servicebus/devcred": {mod + "emulator", mod + "demo", mod + "store", mod + "web", mod + "views"},
		// The connection-string parser is pure: the command line uses it without the SDK.
		"servicebus/connstr": {"github.com/Azure/", mod + "emulator", mod + "demo", mod + "store", mod + "web", mod + "views", "net/http"},
		// The emulator and the demo know nothing of the dashboard.
		"emulator": {mod + "dlq", mod + "replay", mod + "audit", mod + "auth", mod + "store", mod + "web", mod + "views", mod + "servicebus", mod + "metrics", mod + "demo", "modernc.org/sqlite"},
		"demo":     {mod + "dlq", mod + "replay", mod + "audit", mod + "auth", mod + "store", mod + "web", mod + "views", mod + "servicebus", mod + "metrics", "modernc.org/sqlite"},
		// metrics reads the catalog and jobs through its own small interfaces
		// (database/sql comes in with client_golang's collectors package).
		"alert":   {"database/sql", "modernc.org/sqlite", "net/http", "github.com/Azure/", mod + "store", mod + "web", mod + "views", mod + "servicebus", "github.com/a-h/templ"},
		"metrics": {"modernc.org/sqlite", "github.com/Azure/", mod + "store", mod + "web", mod + "views", mod + "servicebus"},
		// cluster coordinates replicas through store/replica (PostgreSQL)
		// and the consumers' interfaces; it knows neither SQLite, HTTP nor
		// Service Bus.
		"cluster": {"modernc.org/sqlite", "net/http", "github.com/Azure/", mod + "web", mod + "views", mod + "servicebus", mod + "emulator", "github.com/a-h/templ"},
	}
	args := []string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}
	for pkg := range forbidden {
		args = append(args, mod+pkg)
	}
	out, err := exec.CommandContext(t.Context(), "go", args...).Output()
	if err != nil {
		t.Skipf("go list not available: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], mod)
		for _, dep := range fields[1:] {
			for _, bad := range forbidden[pkg] {
				if dep == bad || strings.HasPrefix(dep, bad+"/") || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("%s depends on %s, which it must not", pkg, dep)
				}
			}
		}
	}
}
