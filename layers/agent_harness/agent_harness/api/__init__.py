"""The HTTP API (DESIGN §4): request models, identity, routes."""
