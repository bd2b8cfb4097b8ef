"""Tests of the release stage: gates, archives, release command, publishing, CI matrix."""
