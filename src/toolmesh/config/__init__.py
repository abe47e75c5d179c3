"""Configuration: the store that persists config items (and, later, the service around it)."""
