"""Verification gates run against built libraries: layouts, symbols, smoke generation."""
