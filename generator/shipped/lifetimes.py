"""Who frees which llama.cpp object, and when: a model outlives every context on it.

A :class:`NativeObject` holds one native pointer and the function that frees it. Objects that use
it (a context uses its model, and its draft model; a speculative sidecar uses its context) are
registered as its dependents and freed first, whichever way it goes: an explicit ``close()``, or
the garbage collector through the owner's ``weakref.finalize``, or the interpreter's exit. It
never refers back to its Python owner, so a collected owner frees it as well.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from .errors import LlamaClosedError, LlamaRuntimeError


class NativeObject:
    """One native object (``what`` names it in errors) freed by ``free`` at most once."""

    def __init__(self, what: str, pointer: Any, free: Callable[[Any], None], null: Any) -> None:
        self.what = what
        self._pointer = pointer
        self._free: Callable[[Any], None] | None = free
        self._null = null
        self._dependents: list[NativeObject] = []
        self._users: list[NativeObject] = []
        self._closed_because = ""
        # the thread inside a llama.cpp call on this object, if any (a generation step); freeing
        # it from another thread then is refused, as it would free memory that call uses
        self.active_thread: int | None = None

    @property
    def pointer(self) -> Any:
        """The pointer; :class:`LlamaClosedError` once freed."""
        if self._free is None:
            raise LlamaClosedError(f"the {self.what} was closed{self._closed_because}")
        return self._pointer

    @property
    def alive(self) -> bool:
        return self._free is not None

    def depends_on(self, user: NativeObject) -> None:
        """Free this object before ``user`` is freed (it reads ``user``'s memory)."""
        if not user.alive:
            raise LlamaClosedError(f"the {user.what} was closed{user._closed_because}")
        user._dependents.append(self)
        self._users.append(user)

    def release(self, because: str = "") -> None:
        """Free the dependents (newest first), then this object; a second call does nothing."""
        free = self._free
        if free is None:
            return
        self._check_idle()
        while self._dependents:
            self._dependents[-1].release(f" (closed with its {self.what})")
        self._free = None
        self._closed_because = because
        for user in self._users:
            user._dependents.remove(self)
        self._users.clear()
        if self._pointer != self._null:
            free(self._pointer)
        self._pointer = self._null

    def _check_idle(self) -> None:
        active = self.active_thread
        if active is not None and active != threading.get_ident():
            raise LlamaRuntimeError(
                f"the {self.what} is in use by another thread (a generation step): cancel the "
                "generation (Cancellation) and let it return before closing"
            )
        for dependent in self._dependents:
            dependent._check_idle()

    def finalize_with(self, owner: object) -> weakref.finalize[[], object]:
        """Release this object when ``owner`` is collected (or at exit), if not closed first."""
        return weakref.finalize(owner, self.release)
