package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic and that every failure
// is reported as text.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	bad, _ := filepath.Glob(filepath.Join("testdata", "bad", "*.json"))
	for _, name := range append(files, bad...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Parse(strings.NewReader(in))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate rejects: %v", err)
		}
	})
}
