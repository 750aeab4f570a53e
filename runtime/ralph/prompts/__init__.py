"""The Jinja2 prompt templates of the Ralph roles (package data)."""
