package handlers

import "github.com/labstack/echo/v4"

// registerStats adds the stats pages (stub until they land).
func (s *Studio) registerStats(g *echo.Group) {}
