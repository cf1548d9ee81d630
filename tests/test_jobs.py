"""The job machinery (explorer.jobs.job, .lane, .process): real worker processes, no Streamlit.

No timed assertions: each test waits for an event (a job ending, a report arriving) with a generous
bound, and checks what happened, not how fast.
"""

from __future__ import annotations

import job_functions as jobs
import pytest

from explorer.jobs.job import STALL_SECONDS, Job, JobState, Progress
from explorer.jobs.lane import Lane
from explorer.jobs.tasks import portable
from remat_core.batch import WorkerStopped, should_beat
from remat_core.graph import training_chain

BOUND = 60.0
"""The longest any test waits for an event (a worker starting on a busy machine)."""


@pytest.fixture(scope="module")
def lane():
    lane = Lane("test", beat_seconds=0.05, warm=True)
    yield lane
    lane.stop()


def finished(job: Job) -> Job:
    assert job.wait(BOUND), f"{job!r} did not end within {BOUND:.0f} s"
    return job


def started(job: Job) -> Job:
    """Wait until the job runs and has reported once (its first step)."""
    assert job.wait_for_report(job.submitted_at, BOUND) and job.state is JobState.RUNNING, job
    return job


def test_a_job_runs_in_the_worker_and_its_result_is_kept_by_key(lane):
    job = finished(lane.submit(("add", 1, 2), jobs.add, 1, 2, label="one plus two"))
    assert job.state is JobState.DONE and job.outcome() == 3
    assert lane.submit(("add", 1, 2), jobs.add, 1, 2) is job and lane.find(("add", 1, 2)) is job


def test_a_graph_crosses_to_the_worker_once_for_many_jobs(lane):
    graph = training_chain(12)
    sent = lane.graphs_sent
    first = finished(lane.submit(("nodes", 1), jobs.node_count, graph=portable(graph)))
    second = finished(lane.submit(("nodes", 2), jobs.node_count, graph=portable(graph)))
    assert first.outcome() == second.outcome() == len(graph)
    assert lane.graphs_sent == sent + 1


def test_progress_steps_and_partial_results_arrive_with_the_job(lane):
    job = finished(lane.submit(("steps", 5), jobs.counted_steps, 5, total=5, label="five steps"))
    assert job.outcome() == 5 and job.partial == [0, 1, 4, 9, 16]
    assert job.progress == Progress(5, 5, "step 5")


def test_cancelling_a_running_job_kills_its_worker_and_the_next_job_runs_in_a_fresh_one(lane):
    blocker = started(lane.submit(("forever", "cancel"), jobs.forever))
    pid, workers = lane.worker_pid, lane.workers_started
    lane.cancel(blocker)
    assert finished(blocker).state is JobState.CANCELLED and "cancelled" in blocker.describe_end()
    assert lane.find(blocker.key) is blocker  # kept: a page polling for it does not start it again
    after = finished(lane.submit(("add", 2, 2), jobs.add, 2, 2))
    assert after.outcome() == 4 and lane.workers_started == workers + 1 and lane.worker_pid != pid


def test_cancelling_a_queued_job_leaves_the_running_one_alone(lane):
    blocker = started(lane.submit(("forever", "queued"), jobs.forever))
    queued = lane.submit(("add", 3, 3), jobs.add, 3, 3)
    assert queued.state is JobState.QUEUED
    lane.cancel(queued)
    assert queued.state is JobState.CANCELLED and blocker.state is JobState.RUNNING
    lane.cancel(blocker)
    finished(blocker)


def test_a_newer_job_of_a_group_supersedes_the_queued_ones_and_only_the_latest_runs(lane):
    blocker = started(lane.submit(("forever", "supersede"), jobs.forever, group=("model", "dtr")))
    older = [lane.submit(("budget", b), jobs.add, b, 0, group=("model", "dtr")) for b in (10, 20)]
    latest = lane.submit(("budget", 30), jobs.add, 30, 0, group=("model", "dtr"))
    other = lane.submit(("budget", 40), jobs.add, 40, 0, group=("model", "rotor"))
    assert [j.state for j in older] == [JobState.SUPERSEDED] * 2 and lane.find(("budget", 10)) is None
    assert blocker.state is JobState.RUNNING  # a running job is not superseded
    lane.cancel(blocker)
    assert finished(latest).outcome() == 30 and finished(other).outcome() == 40
    again = finished(lane.submit(("budget", 10), jobs.add, 10, 0, group=("model", "dtr")))
    assert again.outcome() == 10  # asked again later: queued anew


def test_a_job_past_its_time_limit_is_stopped(lane):
    job = finished(lane.submit(("forever", "limit"), jobs.forever, time_limit=0.5))
    assert job.state is JobState.TIMED_OUT and "its time limit of 0.5 s" in job.describe_end()
    assert finished(lane.submit(("add", 5, 5), jobs.add, 5, 5)).outcome() == 10


def test_a_job_that_raises_fails_and_its_exception_is_raised_in_the_app(lane):
    job = finished(lane.submit(("broken",), jobs.broken))
    assert job.state is JobState.FAILED
    with pytest.raises(ValueError, match="broken on purpose"):
        job.outcome()


def test_a_worker_that_dies_fails_its_job_and_the_lane_goes_on(lane):
    job = finished(lane.submit(("dies",), jobs.dies, label="a dying job"))
    assert job.state is JobState.FAILED and isinstance(job.error, WorkerStopped)
    assert "Retry" in str(job.error)
    assert finished(lane.submit(("add", 7, 7), jobs.add, 7, 7)).outcome() == 14


def test_retry_cancels_a_running_job_and_starts_the_same_work_first_in_the_queue(lane):
    stuck = started(lane.submit(("forever", "retry"), jobs.forever, label="stuck"))
    fresh = lane.retry(stuck)
    assert finished(stuck).state is JobState.CANCELLED
    assert fresh is not stuck and fresh.key == stuck.key and lane.find(stuck.key) is fresh
    started(fresh)
    lane.cancel(fresh)
    finished(fresh)


def test_the_heartbeat_reports_while_a_long_step_runs_and_a_silent_job_is_stalled(lane):
    job = started(lane.submit(("forever", "beat"), jobs.forever))
    stepped = job.last_report_at
    assert job.wait_for_report(stepped, BOUND)  # a beat: no new step, yet it reported
    assert job.progress.current == "waiting forever" and not job.stalled()
    assert job.stalled(now=job.last_report_at + STALL_SECONDS)
    assert not job.stalled(now=job.last_report_at + STALL_SECONDS - 1)
    lane.cancel(job)
    finished(job)
    assert not job.stalled(now=job.last_report_at + 10 * STALL_SECONDS)  # only a running job stalls


def test_the_heartbeat_vouches_for_a_step_only_within_its_allowance():
    assert should_beat(5.0, None) and should_beat(5.0, 10.0)
    assert not should_beat(10.0, 10.0) and not should_beat(60.0, 10.0)


def test_finished_results_are_kept_within_their_weight_the_oldest_dropped_first():
    lane = Lane("weighed", kept_weight=10, weigh=lambda result: result)
    try:
        first = finished(lane.submit(("w", 1), jobs.add, 4, 0))
        second = finished(lane.submit(("w", 2), jobs.add, 4, 0))
        lane.find(("w", 1))  # asked for again: now the most recent
        finished(lane.submit(("w", 3), jobs.add, 4, 0))
        assert lane.find(("w", 1)) is first and lane.find(("w", 2)) is None and second.outcome() == 4
    finally:
        lane.stop()


def test_a_stopped_lane_cancels_what_it_holds_and_takes_no_more_work():
    lane = Lane("stopped")
    running = lane.submit(("forever", "stop"), jobs.forever)
    queued = lane.submit(("add", 1, 1), jobs.add, 1, 1)
    lane.stop()
    assert finished(queued).state is JobState.CANCELLED and finished(running).state is JobState.CANCELLED
    assert lane.submit(("add", 2, 1), jobs.add, 2, 1).state is JobState.CANCELLED


def test_an_outcome_travels_with_its_schedule_packed_and_unpacks_it_on_first_use():
    import pickle

    from remat_core import SolveOutcome, checkpoint_all_peak, solve_outcome

    graph = training_chain(20)
    sent = solve_outcome(graph, checkpoint_all_peak(graph), "checkpoint-all")
    schedule = sent.schedule
    received = pickle.loads(pickle.dumps(sent))
    assert received._schedule is None and received.feasible and received.ops == len(schedule)
    assert received.stats == schedule.stats and received.solver_info == schedule.solver_info
    assert received.schedule.ops == schedule.ops and received.schedule.simulation.peak == schedule.simulation.peak
    assert pickle.loads(pickle.dumps(sent.portable())).schedule.simulation is None  # for a receiver that simulates
    refused = SolveOutcome("rotor", 10, "infeasible", detail="too small")
    assert not refused.feasible and refused.schedule is None and pickle.loads(pickle.dumps(refused)) == refused
