package handlers

import (
	"context"

	"github.com/labstack/echo/v4"
)

// Stubs for the per-database pages; each page file replaces its own.

func (s *Studio) registerDocuments(g *echo.Group)  {}
func (s *Studio) registerHiLo(g *echo.Group)       {}
func (s *Studio) registerIdentities(g *echo.Group) {}
func (s *Studio) registerStats(g *echo.Group)      {}

func (s *Studio) auditTick(ctx context.Context) {}
