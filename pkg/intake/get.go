package intake

import (
	"net/http"
)

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if p := noBody(r); p != nil {
		writeProblem(w, r, p)
		return
	}
	if err := validID(h.cfg.Store.Validator(), r.PathValue("id")); err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.cfg.Store.ShowAs(r.Context(), h.caller(r), r.PathValue("id"))
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
