# ruff: noqa
"""Logs every hybrid round (plan, best rates, costs, pair record) and each round's result to
/tmp/trace/rounds.log, in every Python process started with this folder on PYTHONPATH: the app
and bench.tools.served alike. Used as
    PYTHONPATH=bench/results/lookup-yields-emulated-avx2-zen5-2026-11-29/trace python -m bench.tools.cpu_class AVX2 -- python -m bench.tools.served --examples 3 --repeats 3
(make /tmp/trace first). A scratch tool kept with the runs it explains; yields.py sums its log."""
import os, sys, threading, time
LOGF = "/tmp/trace/rounds.log"
def _patch():
    for _ in range(2400):
        mod = sys.modules.get("spec.decoding.policy.hybrid_k")
        if mod is not None and hasattr(mod, "HybridK"):
            break
        time.sleep(0.25)
    else:
        return
    H = mod.HybridK
    from spec.config import DRAFT_MODEL
    orig_next, orig_rates, orig_obs = H.next_round, H.rates, H.observe_round
    def rates(self, key, available):
        r = orig_rates(self, key, available)
        self._t_rates = dict(r)
        return r
    def next_round(self, context):
        self._t_rates = None
        plan = orig_next(self, context)
        r = self._t_rates or {}
        d = [(v, p) for p, v in r.items() if p.source == DRAFT_MODEL]
        bd = max(d, key=lambda x: x[0]) if d else (0, None)
        o = [(v, p) for p, v in r.items() if p.source != DRAFT_MODEL]
        bo = max(o, key=lambda x: x[0]) if o else (0, None)
        m, c = self.memory, self.costs
        with open(LOGF, "a") as f:
            f.write(f"{os.getpid()} T={time.perf_counter():.4f} {threading.current_thread().name} ctx={len(context)} plan={plan.k},{plan.draft_length},{plan.source} "
                    f"draft={bd[0]:.2f}@{bd[1] and (bd[1].k, bd[1].draft_length)} other={bo[0]:.2f}@{bo[1] and (bo[1].k, bo[1].draft_length, bo[1].source)} "
                    f"s1={1000*c.steady(1):.0f} s2={1000*c.steady(2):.0f} s3={1000*c.steady(3):.0f} s5={1000*c.steady(5):.0f} sw={1000*(c.switch or 0):.0f} "
                    f"a={m.alpha:.2f} la={m.long_alpha:.2f} y={m.yielded:.2f} call={1000*(m.call_seconds or 0):.1f} "
                    f"catch={1000*(m.catch_up_seconds or 0):.0f} read={1000*(m.read_seconds or 0):.2f} run={self.run_length} "
                    f"unread={self._unread} readp={self._read_prompt} inrun={self._in_run} pause={getattr(self.pause, '__dict__', '')}\n")
        return plan
    def observe_plain(self, seconds):
        with open(LOGF, "a") as f:
            f.write(f"{os.getpid()} T={time.perf_counter():.4f} PLAIN {1000*seconds:.1f}\n")
        return orig_plain(self, seconds)
    def observe_round(self, result):
        with open(LOGF, "a") as f:
            f.write(f"{os.getpid()} T={time.perf_counter():.4f} ROUND k={self._plan.k} src={self._plan.source} {result}\n")
        return orig_obs(self, result)
    orig_plain = H.observe_plain
    H.rates, H.next_round, H.observe_plain, H.observe_round = rates, next_round, observe_plain, observe_round
threading.Thread(target=_patch, daemon=True).start()
