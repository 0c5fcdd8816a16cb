package handlers

import "github.com/labstack/echo/v4"

// registerHiLo adds the hilo pages (stub until they land).
func (s *Studio) registerHiLo(g *echo.Group) {}
