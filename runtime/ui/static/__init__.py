"""The web page's scripts and styles (package data, served as they are)."""
