package handlers

import "github.com/labstack/echo/v4"

// registerDocuments adds the documents pages (stub until they land).
func (s *Studio) registerDocuments(g *echo.Group) {}
