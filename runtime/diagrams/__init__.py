"""Diagrams of spec files and live sessions: Graphviz, Mermaid pages, staleness."""
