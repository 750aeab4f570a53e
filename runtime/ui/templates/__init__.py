"""The web page's Jinja2 templates (package data)."""
