package intake

import (
	"net/http"
)

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if p := noBody(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	v, err := h.cfg.Store.ShowAs(r.Context(), h.caller(r), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	doc, err := h.cfg.Store.Document(r.Context(), v, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}
