package atom

import "net/http"

// showNamespace answers GET /$namespaceinfo. The emulator reports itself as a
// Standard namespace (topics work; no messaging units) created when the
// handler was.
func (h *handler) showNamespace(w http.ResponseWriter, rq *request) error {
	name := h.ns.Name()
	d := &namespaceXML{
		nsAttrs:       descNS(),
		CreatedTime:   timeText(h.created),
		MessagingSKU:  "Standard",
		ModifiedTime:  timeText(h.created),
		Name:          name,
		NamespaceType: "Messaging",
	}
	writeXML(w, http.StatusOK, h.entry(rq, "$namespaceinfo", name, h.created, h.created, contentXML{Namespace: d}))
	return nil
}
