"""API/ABI diff of two IRs: classified changes, a Markdown report and a JSON record."""

from generator.diff.compare import compare
from generator.diff.model import ApiDiff, Change, Detail, Side

__all__ = ["ApiDiff", "Change", "Detail", "Side", "compare"]
