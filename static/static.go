package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"path"
	"strings"
	"sync"
)

//go:embed *.css *.js *.svg
var files embed.FS

// Asset is one embedded file.
type Asset struct {
	Name   string // file name as embedded, e.g. "app.css"
	Hashed string // name with a content hash, e.g. "app.1a2b3c4d5e6f.css"
	Data   []byte
}

type index struct {
	byName   map[string]*Asset
	byHashed map[string]*Asset
}

var load = sync.OnceValue(func() index {
	ix := index{byName: map[string]*Asset{}, byHashed: map[string]*Asset{}}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(p)
		a := &Asset{Name: p, Hashed: strings.TrimSuffix(p, ext) + "." + hex.EncodeToString(sum[:6]) + ext, Data: b}
		ix.byName[a.Name] = a
		ix.byHashed[a.Hashed] = a
		return nil
	})
	if err != nil {
		// Embedded files are fixed at build time; failing to read them is a
		// broken build, not a runtime condition.
		panic("static: " + err.Error())
	}
	return ix
})

// Prefix is the URL path under which assets are served.
const Prefix = "/static/"

// URL returns the cache-busting URL of the embedded file name, e.g.
// "/static/app.1a2b3c4d5e6f.css". It panics on an unknown name so that a
// typo in a template fails every test that renders it.
func URL(name string) string {
	a, ok := load().byName[name]
	if !ok {
		panic("static: no embedded file " + name)
	}
	return Prefix + a.Hashed
}

// Lookup finds an asset by its hashed name (immutable, cache forever) or by
// its plain name (may change, revalidate).
func Lookup(name string) (a *Asset, hashed bool, ok bool) {
	ix := load()
	if a, ok := ix.byHashed[name]; ok {
		return a, true, true
	}
	if a, ok := ix.byName[name]; ok {
		return a, false, true
	}
	return nil, false, false
}
