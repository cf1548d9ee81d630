"""The safety net under every page: whatever a page, a fragment or a widget callback raises is logged with
its traceback and shown as a short error with a "Details" expander, and goes no further, so that the
sidebar and every other page keep working and no Streamlit exception block is ever shown.

Inputs are checked where they enter (the widgets, the URL, uploads); this net catches what those checks
missed. Streamlit's own control flow (``st.rerun``, ``st.stop``, ``st.switch_page``) raises exceptions that
are not ``Exception`` subclasses, so it passes through untouched.

- :func:`contained`: a ``with`` block (the frame wraps the sidebar and the page in one each).
- :func:`fragment`: ``st.fragment`` with the net inside (a fragment rerun runs without the page around it).
- :func:`callback`: a widget callback; Streamlit runs callbacks before the script, where no ``with`` block
  reaches, so a failure is kept and shown by the frame in the run that follows.
"""

from __future__ import annotations

import functools
import logging
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

from remat_core.errors import first_line

from .widgets.text import plain

LOG = logging.getLogger("explorer")
CALLBACK_FAILURE = "safety_callback_failure"
STATE_MOVED = "safety_state_moved"
"""Set when a widget callback ran or the app reran itself (``st.rerun``) before this run: the state moved, so
the URL the request carries may still show the state before the move (read and cleared by
:mod:`explorer.state.url`)."""
"""Session key: the last failure of a widget callback, shown once by :func:`show_callback_failure`."""


def describe(where: str, kind: str, message: str) -> str:
    """The short message: where it broke, the error's type and first line, and that nothing was lost."""
    return (f"Something went wrong in {where}: {kind}: {message.rstrip('.')}. Your model and settings are kept, and the other "
            f"pages still work. This is a bug in Remat Explorer; the details below help to report it.")


def show_failure(where: str, kind: str, message: str, details: str) -> None:
    """The error and its "Details" expander (the traceback)."""
    st.error(plain(describe(where, kind, message)), icon=":material/error:")
    with st.expander("Details"):
        st.code(details, language=None)


@contextmanager
def contained(where: str) -> Iterator[None]:
    """A ``with`` block whose exceptions are logged and shown (:func:`show_failure`) instead of raised."""
    try:
        yield
    except RerunException:
        st.session_state[STATE_MOVED] = True
        raise
    except Exception as error:  # noqa: BLE001 - the net under every page: anything a page raises stops here
        LOG.error("%s failed", where, exc_info=error)
        show_failure(where, type(error).__name__, first_line(error), _traceback(error))


def fragment(function: Callable | None = None, *, run_every: float | str | None = None,
             key: str | None = None) -> Callable:
    """``st.fragment`` (same ``run_every`` and ``key``: ``st.rerun(key)`` reruns it) whose body runs inside
    :func:`contained`; use it for every fragment."""
    def decorate(body: Callable) -> Callable:
        @functools.wraps(body)
        def guarded(*args: Any, **kwargs: Any) -> None:
            with contained(f"this part of the page ({body.__name__})"):
                body(*args, **kwargs)
            st.session_state.pop(STATE_MOVED, None)  # the move was this run's; a later full run must not see it
        return st.fragment(guarded, run_every=run_every, key=key)
    return decorate(function) if function is not None else decorate


def callback(function: Callable) -> Callable:
    """A widget callback whose failure is logged and kept for the next run to show, not raised."""
    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> None:
        st.session_state[STATE_MOVED] = True
        try:
            function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - a callback failing would fail the whole run before the page
            LOG.error("the callback %s failed", function.__name__, exc_info=error)
            st.session_state[CALLBACK_FAILURE] = (f"a control's reaction ({function.__name__.strip('_')})",
                                                  type(error).__name__, first_line(error), _traceback(error))
    return guarded


def show_callback_failure() -> None:
    """Show, once, the failure a widget callback kept (called by the frame before the page)."""
    kept = st.session_state.pop(CALLBACK_FAILURE, None)
    if kept is not None:
        show_failure(*kept)


def _traceback(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))
