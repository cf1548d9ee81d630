"""The Learn page's step controls: Start, Previous, Play/Pause, Next, End, the speed and the step slider,
all reading and setting the one step value of :mod:`explorer.learn`."""

from __future__ import annotations

import streamlit as st

from .. import learn

SPEED_PICKER = "w_learn_speed"


def step_controls(steps: int) -> int:
    """Draw the controls for a walk-through of ``steps`` steps; returns the step to show (0-based).

    Every control sets :data:`explorer.learn.STEP` in its callback, before anything reads it, and the
    slider is copied from it before it is drawn: the "step k of n" text and the slider always agree.
    Play and a speed change rerun the whole page (the step fragment's timer is set when the page runs).
    """
    learn.tick(steps)
    state = st.session_state
    at = state[learn.STEP]
    last = steps - 1
    with st.container(horizontal=True, vertical_alignment="center", gap="small"):
        st.button("Start", icon=":material/first_page:", key="learn_start", on_click=learn.go_to,
                  args=(0, steps), disabled=at == 0, help="The first step")
        st.button("Previous", icon=":material/chevron_left:", key="learn_back", on_click=learn.go_to,
                  args=(at - 1, steps), disabled=at == 0, shortcut="Left", help="One step back (←)")
        if st.button("Pause" if learn.playing() else "Play", key="learn_play", type="primary",
                     icon=":material/pause:" if learn.playing() else ":material/play_arrow:", disabled=steps < 2,
                     help="Step forward on a timer, at the speed on the right"):
            learn.toggle_play(steps)
            st.rerun()
        st.button("Next", icon=":material/chevron_right:", icon_position="right", key="learn_next",
                  on_click=learn.go_to, args=(at + 1, steps), disabled=at >= last, shortcut="Right",
                  help="One step forward (→)")
        st.button("End", icon=":material/last_page:", icon_position="right", key="learn_end", on_click=learn.go_to,
                  args=(last, steps), disabled=at >= last, help="The last step")
        state[SPEED_PICKER] = state[learn.SPEED]
        speed = st.segmented_control("Speed", learn.SPEEDS, key=SPEED_PICKER, format_func=lambda s: f"{s:g}×",
                                     required=True, label_visibility="collapsed",
                                     help="Play speed: steps per second")
        if speed != state[learn.SPEED]:
            state[learn.SPEED] = speed
            if learn.playing():
                st.rerun()
    st.markdown(f"**Step {at + 1} of {steps}**" + (" · playing" if learn.playing() else ""))
    if steps > 1:
        state[learn.STEP_SLIDER] = at + 1
        st.slider("Step", 1, steps, key=learn.STEP_SLIDER, on_change=learn.slider_moved,
                  label_visibility="collapsed")
    return at
