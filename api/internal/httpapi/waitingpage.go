package httpapi

import (
	"embed"
	"mime"
	"net/http"
	"path"

	"github.com/gin-gonic/gin"
)

// The waiting page's files, in the binary: the api serves them as they are.
//
//go:embed web
var webFiles embed.FS

// pageHeaders are set on the page and its files: only this origin's
// scripts and styles run, and no browser guesses a type.
func pageHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// waitingPage serves /sale/{id}: the one HTML page of every sale, whose
// script reads the sale's id from the address.
func (s *Server) waitingPage(c *gin.Context) {
	if _, ok := pathID(c); !ok {
		return
	}
	s.webFile(c, "sale.html")
}

// staticFile serves the page's script and style sheet.
func (s *Server) staticFile(c *gin.Context) {
	name := c.Param("file")
	if name != "sale.js" && name != "sale.css" {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "no such file")
		return
	}
	s.webFile(c, name)
}

func (s *Server) webFile(c *gin.Context, name string) {
	b, err := webFiles.ReadFile("web/" + name)
	if err != nil {
		s.fail(c, err)
		return
	}
	pageHeaders(c)
	// Short: a new release's page reaches the crowd within a minute.
	c.Header("Cache-Control", "public, max-age=60")
	c.Data(http.StatusOK, mime.TypeByExtension(path.Ext(name)), b) // Go's table: with charset=utf-8
}
