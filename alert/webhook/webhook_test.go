package webhook

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPost: the body arrives as JSON; the status comes back; a redirect is
// not followed.
func TestPost(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + r.Header.Get("Content-Type") + " " + string(b)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	p := New(nil)
	st, err := p.Post(t.Context(), srv.URL+"/hook", []byte(`{"text":"hi"}`))
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("post: %d, %v", st, err)
	}
	if g := <-got; g != `POST application/json {"text":"hi"}` {
		t.Errorf("received %q", g)
	}
	if st, err := p.Post(t.Context(), srv.URL+"/moved", []byte(`{}`)); err != nil || st != http.StatusFound {
		t.Errorf("redirect: %d, %v; want 302 not followed", st, err)
	}
}

// TestErrorsHideTheURL: an unreachable webhook's error does not carry the
// URL (its path is a secret); a timeout says so.
func TestErrorsHideTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	secret := "http://" + addr + "/services/T000/B000/XXXXsecretXXXX"
	_, err = New(nil).Post(t.Context(), secret, []byte(`{}`))
	if err == nil || strings.Contains(err.Error(), "XXXXsecretXXXX") {
		t.Errorf("unreachable: %v", err)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	defer close(release) // before Close, which waits for the handler
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = New(nil).Post(ctx, slow.URL+"/XXXXsecretXXXX", []byte(`{}`))
	if err == nil || strings.Contains(err.Error(), "XXXXsecretXXXX") || !strings.Contains(err.Error(), "no answer in time") {
		t.Errorf("timeout: %v", err)
	}
}
