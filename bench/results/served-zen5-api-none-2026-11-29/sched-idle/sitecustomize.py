# ruff: noqa -- a record of a measurement, kept as it ran: with EXP_POLICY=idle, the server threads that serve_below_races lowers also run SCHED_IDLE
import os
if os.environ.get("EXP_POLICY") == "idle":
    _set = os.setpriority
    def setpriority(which, who, prio):
        _set(which, who, prio)
        os.sched_setscheduler(who, os.SCHED_IDLE, os.sched_param(0))
        print(f"[exp] thread {who} now SCHED_IDLE", flush=True)
    os.setpriority = setpriority
