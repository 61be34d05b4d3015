package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLogKeys keeps one log key per concept: error (never err), job_id
// (never job), entity, namespace; and every key snake_case. It reads the
// source of the packages below (not their tests) and checks the string
// literals in key position of slog calls (Debug, Info, Warn, Error, their
// Context forms, and With).
func TestLogKeys(t *testing.T) {
	dirs := []string{".", "../../replay", "../../dlq", "../../store", "../../servicebus", "../../audit", "../../metrics"}
	// The wrong spelling of each concept, and the right one.
	synonyms := map[string]string{
		"err": "error", "job": "job_id", "jobid": "job_id", "job_ID": "job_id",
		"path": "entity", "entity_path": "entity", "queue": "entity", "ns": "namespace", "namespace_name": "namespace",
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// first is the index of the first key argument of each method.
	first := map[string]int{"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
		"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2, "With": 0}
	checked := 0
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				start, ok := first[sel.Sel.Name]
				if !ok {
					return true
				}
				// Only calls with a message literal are log calls (a t.Error
				// or errors.New has no key-value pairs after it); With has none.
				if sel.Sel.Name != "With" {
					if len(call.Args) <= start-1 {
						return true
					}
					if lit, ok := call.Args[start-1].(*ast.BasicLit); !ok || lit.Kind != token.STRING {
						return true
					}
				}
				for i := start; i < len(call.Args); i += 2 {
					lit, ok := call.Args[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						break // an slog.Attr or a spread: the rest is not key, value pairs
					}
					key, _ := strconv.Unquote(lit.Value)
					checked++
					if want, bad := synonyms[key]; bad {
						t.Errorf("%s: log key %q: use %q", fset.Position(lit.Pos()), key, want)
					} else if !snake.MatchString(key) {
						t.Errorf("%s: log key %q is not snake_case", fset.Position(lit.Pos()), key)
					}
				}
				return true
			})
		}
	}
	if checked < 30 {
		t.Errorf("only %d log keys found: the scan no longer finds the log calls", checked)
	}
}
