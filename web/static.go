package web

import (
	"bytes"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/dlqdash/dlqdash/static"
)

// serveStatic serves embedded files. Hashed names never change content, so
// browsers may keep them for a year; plain names must revalidate.
func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) error {
	a, hashed, ok := static.Lookup(r.PathValue("file"))
	if !ok {
		return ErrNotFound
	}
	serveAsset(w, r, a, hashed)
	return nil
}

// serveFavicon answers GET /favicon.ico, which browsers ask for on pages
// without a <link rel="icon"> (a JSON answer, an image opened on its own),
// with the pages' SVG icon.
func (s *Server) serveFavicon(w http.ResponseWriter, r *http.Request) error {
	a, _, ok := static.Lookup("favicon.svg")
	if !ok {
		return ErrNotFound
	}
	serveAsset(w, r, a, false)
	return nil
}

func serveAsset(w http.ResponseWriter, r *http.Request, a *static.Asset, hashed bool) {
	if ct := mime.TypeByExtension(path.Ext(a.Name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if hashed {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+a.Hashed+`"`)
	http.ServeContent(w, r, a.Name, time.Time{}, bytes.NewReader(a.Data))
}
