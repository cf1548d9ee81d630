"""Remat Explorer's solver package: training graphs, schedules, solvers and the simulator."""
