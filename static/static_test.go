package static

import (
	"strings"
	"testing"
)

func TestURLAndLookup(t *testing.T) {
	u := URL("app.css")
	hashed, ok := strings.CutPrefix(u, Prefix)
	if !ok || hashed == "app.css" || !strings.HasPrefix(hashed, "app.") || !strings.HasSuffix(hashed, ".css") {
		t.Fatalf("URL(app.css) = %q, want %sapp.<hash>.css", u, Prefix)
	}
	tests := []struct {
		name       string
		wantHashed bool
		wantOK     bool
	}{
		{hashed, true, true},
		{"app.css", false, true},
		{"app.000000000000.css", false, false},
		{"missing.js", false, false},
	}
	for _, tt := range tests {
		a, h, ok := Lookup(tt.name)
		if ok != tt.wantOK || h != tt.wantHashed {
			t.Errorf("Lookup(%q) = hashed %v ok %v, want %v %v", tt.name, h, ok, tt.wantHashed, tt.wantOK)
		}
		if ok && (a.Name != "app.css" || len(a.Data) == 0) {
			t.Errorf("Lookup(%q) = %+v", tt.name, a.Name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("URL of an unknown file did not panic")
		}
	}()
	URL("nope.css")
}
