package handlers

import "github.com/labstack/echo/v4"

// registerCluster adds the Cluster page (stub until it lands).
func (s *Studio) registerCluster(g *echo.Group) {}
