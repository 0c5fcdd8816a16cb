package handlers

import (
	"context"

	"github.com/labstack/echo/v4"
)

// registerIdentities adds the identities pages (stub until they land).
func (s *Studio) registerIdentities(g *echo.Group) {}

// auditTick raises alerts for identity counters that would collide (stub).
func (s *Studio) auditTick(ctx context.Context) {}
