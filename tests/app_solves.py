"""AppTest helper: a page run again once the session's solve has ended."""

from streamlit.testing.v1 import AppTest

from explorer import state
from explorer.jobs.results import awaited_solve, options_key


def solved(at: AppTest) -> AppTest:
    """Rerun once the session solver's solve at the session's budget has ended (as the page's poll would; a
    searching solver's, such as auto's, is not waited for by the page)."""
    session = at.session_state
    solver = session[state.SOLVER]
    awaited_solve(session[state.MODEL].graph, session[state.BUDGET], solver,
                  options_key(session[state.OPTIONS].get(solver, {})), session[state.TIME_LIMIT])
    return at.run()
