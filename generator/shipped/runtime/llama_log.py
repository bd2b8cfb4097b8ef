"""llama.cpp's log: joined into lines and routed to the ``llama_bindings.llama_cpp`` logger, or to
stderr as llama.cpp writes it (:func:`set_llama_log`)."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from ..constants import (
    GGML_LOG_LEVEL_CONT,
    GGML_LOG_LEVEL_DEBUG,
    GGML_LOG_LEVEL_ERROR,
    GGML_LOG_LEVEL_INFO,
    GGML_LOG_LEVEL_WARN,
)

if TYPE_CHECKING:
    from ..loader import Libraries

LLAMA_LOGGER: Final = logging.getLogger("llama_bindings.llama_cpp")
LLAMA_LOGGER.addHandler(logging.NullHandler())  # silent unless the application shows it


class _LineJoiner:
    """llama.cpp's log pieces joined into lines; a continuation (GGML_LOG_LEVEL_CONT) keeps the
    level of the line it continues."""

    _LEVELS: Final = {
        GGML_LOG_LEVEL_DEBUG: logging.DEBUG,
        GGML_LOG_LEVEL_INFO: logging.INFO,
        GGML_LOG_LEVEL_WARN: logging.WARNING,
        GGML_LOG_LEVEL_ERROR: logging.ERROR,
    }
    _CONT: Final = GGML_LOG_LEVEL_CONT

    def __init__(self) -> None:
        self._line = ""
        self._level = logging.INFO
        self.errors: list[str] = []  # a capture's error lines so far

    def feed(self, level: int, message: str) -> list[tuple[int, str]]:
        """The lines ``message`` completes, with their levels."""
        done: list[tuple[int, str]] = []
        if level != self._CONT:
            if self._line:  # a new message while a line was open: that line ends
                done.append((self._level, self._line))
                self._line = ""
            self._level = self._LEVELS.get(level, logging.INFO)
        *lines, self._line = (self._line + message).split("\n")
        return done + [(self._level, line) for line in lines if line]

    def flush(self) -> list[tuple[int, str]]:
        line, self._line = self._line, ""
        return [(self._level, line)] if line else []


class _LlamaLog:
    """Routes llama.cpp's (and ggml's) log to :data:`LLAMA_LOGGER`, or to stderr when verbose.

    The C callback lives as long as the process (llama.cpp keeps the pointer), one per ffi, and
    never raises: C calls it, from any thread. While :meth:`capturing` runs, the error lines are
    also kept for the caller, whatever the routing (a failed load says why in its exception).
    """

    def __init__(self) -> None:
        self.verbose = False
        self._lock = threading.Lock()
        self._joiner = _LineJoiner()
        self._captures: list[_LineJoiner] = []
        self._callbacks: dict[int, tuple[Any, Any]] = {}  # id(ffi) -> (ffi, its callback)
        self._libraries: dict[int, Any] = {}  # id(libllama) -> libllama, held so ids stay unique

    def install(self, libs: Libraries, verbose: bool | None) -> None:
        """Route the log of ``libs``' libllama (each opened library has its own logger)."""
        if verbose is not None:
            self.verbose = verbose
        ffi, llama = libs.ffi, libs.llama
        if id(llama) in self._libraries:
            return
        known = self._callbacks.get(id(ffi))
        if known is not None:
            callback = known[1]
        else:

            def on_log(level: int, text: Any, _data: Any) -> None:
                try:
                    if text != ffi.NULL:
                        self._write(int(level), ffi.string(text).decode("utf-8", "replace"))
                except BaseException:  # nothing may leave a callback that C calls
                    pass

            callback = ffi.callback("void(enum ggml_log_level, const char *, void *)", on_log)
            self._callbacks[id(ffi)] = (ffi, callback)
        self._libraries[id(llama)] = llama
        llama.llama_log_set(callback, ffi.NULL)

    def callback_of(self, libs: Libraries) -> Any:
        """The C log callback installed for ``libs``' ffi (None before :meth:`install`), for a
        library with a logger of its own (libmtmd) to share."""
        known = self._callbacks.get(id(libs.ffi))
        return None if known is None else known[1]

    @contextlib.contextmanager
    def capturing(self) -> Iterator[list[str]]:
        """The error lines llama.cpp logs (from any thread) while the block runs."""
        capture = _LineJoiner()
        errors: list[str] = []
        with self._lock:
            self._captures.append(capture)
        try:
            yield errors
        finally:
            with self._lock:
                self._captures.remove(capture)
                errors += capture.errors + [t for lv, t in capture.flush() if lv >= logging.ERROR]

    def _write(self, level: int, message: str) -> None:
        with self._lock:
            for capture in self._captures:
                capture.errors += [
                    t for lv, t in capture.feed(level, message) if lv >= logging.ERROR
                ]
            lines = [] if self.verbose else self._joiner.feed(level, message)
        if self.verbose:
            sys.stderr.write(message)
            sys.stderr.flush()
            return
        for line_level, line in lines:
            LLAMA_LOGGER.log(line_level, "%s", line)


LLAMA_LOG: Final = _LlamaLog()


def set_llama_log(libs: Libraries, *, verbose: bool) -> None:
    """Where llama.cpp's log goes, process-wide: stderr as llama.cpp writes it (``verbose``) or
    the ``llama_bindings.llama_cpp`` logger (the default once a :class:`Model` was created)."""
    LLAMA_LOG.install(libs, verbose)
