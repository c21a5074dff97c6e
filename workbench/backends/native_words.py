"""Words of memory shared with a device, written and watched from C
(``native/words.c``): a store, a spin on another word with the GIL released,
and a copy, in one call, instead of a Python loop of memoryview reads.

A persistent kernel's host side (the rings of :mod:`workbench.rings`) uses it
for the few operations on which a round trip waits; the module knows nothing
of what the words mean. It is built once per machine by :mod:`.native_build`
(a C compiler and Python's headers needed); where it cannot be, or with
``WORKBENCH_NATIVE_WORDS=0``, :func:`module` gives None and callers do the same
work in Python (:func:`unavailable_reason` says why). It is the same on every
backend: the words are plain host memory (mapped into a GPU, or the
simulator's shared arena), so it sits beside both backends, not in either.

The functions (addresses are ints; the caller keeps the memory alive):

- ``publish_wait(store, value, word, want, src, dst, nbytes, spin_ns[, bell])``:
  ``(published_ns, seen_ns)`` (``time.perf_counter_ns``'s clock) or None when
  ``word`` did not come to hold ``want`` within ``spin_ns``;
- ``BoxCaller(...)``: a ring's ``call()`` through its call box, one C call
  per message (``caller.call(message, seq, spin_ns)``: the message packed,
  written as flagged words, the flagged answer watched and returned as a
  record; see ``words.c`` for the arguments);
- ``Slots(...)``: a ring's queue of slots, for ``send()`` and ``recv()`` of
  whole batches (``slots.write(batch, first, next_recv)`` copies a batch in,
  unpublished; ``slots.take(first, count, head, spin_ns)`` watches for a run
  of answers and copies them out; see ``words.c``);
- ``ring_bell(control)``: wakes a ring's dispatcher that sleeps (the
  simulator's) after something was published; ``BoxCaller``, ``Slots`` and
  ``publish_wait`` take the same address as an optional last argument;
- ``wait_word(word, want, spin_ns)`` -> bool;
- ``run_length(words, first, count)`` -> how many words in a row hold
  ``first, first + 1, ...``.
"""
from __future__ import annotations

import functools
import sys

from . import native_build

SOURCE = native_build.NATIVE_DIR / "words.c"
SWITCH = "WORKBENCH_NATIVE_WORDS"

_reason: str | None = None


@functools.lru_cache(maxsize=None)
def module():
    """The built ``_wb_words`` module, or None (see :func:`unavailable_reason`)."""
    global _reason
    if not sys.platform.startswith("linux"):  # CLOCK_MONOTONIC is perf_counter_ns's clock on Linux
        _reason = f"not built on {sys.platform}"
        return None
    built, _reason = native_build.build(SOURCE, "_wb_words", SWITCH)
    return built


def unavailable_reason() -> str | None:
    """Why words are watched from Python (None: the C module is used, or was not asked for yet)."""
    return _reason
