"""The Learn page's step controls: Start, Previous, Play/Pause, Next, End, the speed and the step slider,
all reading and setting the one step value of :mod:`explorer.state.learn`."""

from __future__ import annotations

import streamlit as st

from ..state import learn


def step_controls(steps: int, peak_step: int | None = None) -> int:
    """Draw the controls for a walk-through of ``steps`` steps (and a button to ``peak_step``, where memory peaks);
    returns the step to show (0-based).

    Every control sets :data:`explorer.state.learn.STEP` in its callback, before anything reads it, and the
    slider is drawn at that step: the "step k of n" text and the slider always agree. Play, Pause and a
    speed change rerun the whole page, which sets the step fragment's timer again.
    """
    if learn.timer_changed():
        st.rerun()
    learn.tick(steps)
    state = st.session_state
    at = state[learn.STEP]
    last = steps - 1
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.button("Start", icon=":material/first_page:", key="learn_start", on_click=learn.go_to,
                  args=(0, steps), disabled=at == 0, help="The first step")
        st.button("Previous", icon=":material/chevron_left:", key="learn_back", on_click=learn.step_by,
                  args=(-1, steps), disabled=at == 0, shortcut="Left", help="One step back (←)")
        st.button("Pause" if learn.playing() else "Play", key="learn_play", type="primary",
                  icon=":material/pause:" if learn.playing() else ":material/play_arrow:", disabled=steps < 2,
                  on_click=learn.toggle_play, args=(steps,), help="Step forward on a timer, at the speed on the right")
        st.button("Next", icon=":material/chevron_right:", icon_position="right", key="learn_next",
                  on_click=learn.step_by, args=(1, steps), disabled=at >= last, shortcut="Right",
                  help="One step forward (→)")
        st.button("End", icon=":material/last_page:", icon_position="right", key="learn_end", on_click=learn.go_to,
                  args=(last, steps), disabled=at >= last, help="The last step")
        st.segmented_control("Speed", learn.SPEEDS, key=learn.SPEED, default=1.0, format_func=lambda s: f"{s:g}×",
                             required=True, label_visibility="collapsed", help="Play speed: steps per second")
    with st.container(horizontal=True, vertical_alignment="center"):
        st.markdown(f"**Step {at + 1} of {steps}**" + (" · playing" if learn.playing() else ""))
        if peak_step is not None and at != peak_step:
            st.button(f"Go to the peak (step {peak_step + 1})", key="learn_peak", on_click=learn.go_to,
                      args=(peak_step, steps), type="tertiary", icon=":material/vertical_align_top:",
                      help="The step at which this schedule's memory peaks")
    if steps > 1:
        st.slider("Step", 1, steps, value=at + 1, key=learn.slider_key(at), on_change=learn.slider_moved,
                  args=(at,), label_visibility="collapsed")
    return at
