"""The HTTP API (docs/api.md): request models, request parsing, one router per resource."""
