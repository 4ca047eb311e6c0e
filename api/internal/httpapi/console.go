package httpapi

import (
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
)

// Console is how the operator console (/console) signs operators in: at
// Issuer's provider as the public client ClientID, with the authorization
// code flow and PKCE (empty ClientID: only a development token handed in
// the address's fragment), and which claim makes a token an operator's,
// as the api's own check reads it.
type Console struct {
	Issuer    string `json:"issuer,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	RoleClaim string `json:"role_claim"`
	AdminRole string `json:"admin_role"`
}

// WithConsole sets how the console signs operators in.
func WithConsole(c Console) Option {
	return func(s *Server) { s.console = c }
}

// consoleCSP lets the console's own scripts and styles run, and its
// scripts talk to this origin and to the provider's (the discovery
// document, the token endpoint): nothing inline, no other host.
func (s *Server) consoleCSP() string {
	connect := "'self'"
	if u, err := url.Parse(s.console.Issuer); err == nil && s.console.ClientID != "" && u.Host != "" {
		connect += " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'self'; connect-src " + connect +
		"; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
}

// consolePage serves /console, the one HTML page of the console; its
// modules route the views by the address's fragment.
func (s *Server) consolePage(c *gin.Context) {
	s.consoleFile(c, "console.html")
}

// consoleAsset serves the console's modules, its style sheet and its
// sign-in settings (config.json).
func (s *Server) consoleAsset(c *gin.Context) {
	name := c.Param("file")
	if name == "config.json" {
		s.consoleHeaders(c)
		c.JSON(http.StatusOK, s.console)
		return
	}
	if strings.HasPrefix(name, ".") || (path.Ext(name) != ".js" && path.Ext(name) != ".css") {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "no such file")
		return
	}
	s.consoleFile(c, name)
}

func (s *Server) consoleFile(c *gin.Context, name string) {
	b, err := webFiles.ReadFile("web/console/" + name)
	if err != nil {
		writeError(c, http.StatusNotFound, "NOT_FOUND", "no such file")
		return
	}
	s.consoleHeaders(c)
	c.Data(http.StatusOK, mime.TypeByExtension(path.Ext(name)), b)
}

// consoleHeaders are pageHeaders with the console's policy. The console
// is not cached: an operator gets a release's modules at the next load,
// all of the same release.
func (s *Server) consoleHeaders(c *gin.Context) {
	pageHeaders(c)
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", s.consoleCSP())
	h.Set("Cache-Control", "no-cache")
}
