package web

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/dlqdash/dlqdash/views"
)

// How much of a body the message page shows.
const (
	// bodyShown is the most formatted text the page holds; the rest is a
	// download away.
	bodyShown = 64 << 10
	// bodyHexShown is the most bytes a hex dump shows.
	bodyHexShown = 4 << 10
	// bodyFormatMax is the largest body the page indents (JSON, XML);
	// larger ones are shown as text.
	bodyFormatMax = 4 << 20
)

// bodyView prepares a body for the message page: indented JSON or XML when
// it parses as such, text when it is UTF-8, otherwise a hex dump; cut to
// what the page shows. The result is text for templ to escape, never HTML.
func bodyView(body []byte, contentType string) views.BodyView {
	v := views.BodyView{Size: int64(len(body)), ContentType: contentType}
	if len(body) == 0 {
		v.Kind = views.BodyEmpty
		return v
	}
	if !utf8.Valid(body) {
		v.Kind = views.BodyHex
		shown := body
		if len(shown) > bodyHexShown {
			shown, v.Truncated, v.ShownBytes = shown[:bodyHexShown], true, bodyHexShown
		}
		v.Text = hex.Dump(shown)
		return v
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	trimmed := bytes.TrimLeft(body, " \t\r\n\ufeff")
	v.Kind, v.Text = views.BodyText, string(body)
	if len(body) <= bodyFormatMax {
		switch {
		case isJSONType(mt) || len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '['):
			var buf bytes.Buffer
			if json.Indent(&buf, body, "", "  ") == nil {
				v.Kind, v.Text = views.BodyJSON, buf.String()
			}
		case isXMLType(mt) || len(trimmed) > 0 && trimmed[0] == '<':
			if s, err := indentXML(body); err == nil {
				v.Kind, v.Text = views.BodyXML, s
			}
		}
	}
	if len(v.Text) > bodyShown {
		cut := bodyShown
		for cut > 0 && !utf8.RuneStart(v.Text[cut]) {
			cut--
		}
		v.Text, v.Truncated, v.ShownBytes = v.Text[:cut], true, cut
	}
	return v
}

func isJSONType(mt string) bool { return mt == "application/json" || strings.HasSuffix(mt, "+json") }

func isXMLType(mt string) bool {
	return mt == "application/xml" || mt == "text/xml" || strings.HasSuffix(mt, "+xml")
}

// indentXML re-encodes an XML document's tokens with indentation. It
// expands nothing (no entities beyond XML's own, no external resources):
// encoding/xml only tokenises.
func indentXML(body []byte) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	var buf bytes.Buffer
	e := xml.NewEncoder(&buf)
	e.Indent("", "  ")
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		// Whitespace between elements is the old indentation: drop it.
		if cd, ok := tok.(xml.CharData); ok && len(bytes.TrimSpace(cd)) == 0 {
			continue
		}
		if err := e.EncodeToken(xml.CopyToken(tok)); err != nil {
			return "", err
		}
	}
	if err := e.Flush(); err != nil {
		return "", err
	}
	return buf.String(), nil
}
