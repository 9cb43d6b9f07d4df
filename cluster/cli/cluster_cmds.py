"""`herd up`, `herd down`, `herd dashboard`: the local Ray cluster itself."""

from __future__ import annotations

import argparse
import os
import sys

from herd import local
from herd.jobs import UserError
from herd.teardown import DEFAULT_GRACE_S


def add_commands(sub) -> None:
    """up, down, dashboard: their parsers, each handled by its cmd_ function."""
    s = sub.add_parser("up", help="start a local Ray head (dashboard on 127.0.0.1:8265)")
    s.add_argument("--port", type=int, default=6379, help="the GCS port: the cluster's address "
                   "is 127.0.0.1:PORT (default 6379)")
    s.add_argument("--dashboard-port", type=int, default=8265,
                   help="the Ray dashboard's port (default 8265); later commands find it by themselves")
    s.add_argument("--num-cpus", type=int, default=None, help="CPUs the cluster offers to jobs "
                   "(default: every core of this machine)")
    s.add_argument("--metrics-port", type=int, default=8080,
                   help="the port of Ray's Prometheus metrics (default 8080)")
    s.add_argument("--client-port", type=int, default=10001, help="Ray client server port")
    s.add_argument("--agent-port", type=int, default=52365, help="Ray dashboard agent's HTTP port")
    s.add_argument("--preload", action=argparse.BooleanOptionalAction, default=None,
                   help="the workers Ray prestarts import torch & co. as they start, and `up` "
                   "returns once they are done (herd/preload.py); default: on where a GPU is")
    s.set_defaults(fn=cmd_up)
    s = sub.add_parser("down", help="wind down its running jobs (summary, final checkpoint, books), "
                       "then stop the Ray cluster `herd up` started (no other)")
    s.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, metavar="SECONDS",
                   help="how long the jobs' wind-down may take before the cluster goes (default "
                   f"{DEFAULT_GRACE_S:g}); a replay buffer that cannot be saved in it is left out")
    s.add_argument("--force", action="store_true", help="stop at once, without winding jobs down "
                   "(each job's line says what it loses)")
    s.set_defaults(fn=cmd_down)
    s = sub.add_parser("dashboard", help="the Ray dashboard's URL and how to log into it")
    s.add_argument("--open", action="store_true", help="also open it in this machine's web browser")
    s.add_argument("--token", action="store_true", help="print only the cluster's token (to paste)")
    s.add_argument("--env", action="store_true", help="print the shell line that makes Ray's CLI "
                   "(`ray job list`, ...) use the token and this dashboard: eval \"$(herd dashboard --env)\"")
    s.set_defaults(fn=cmd_dashboard)


def cmd_up(args) -> int:
    running = f"http://127.0.0.1:{args.dashboard_port}"
    if local.dashboard_up(running):  # up() would return at once: say so, not what a start did
        print(f"Ray head already up; dashboard at {running} (`herd down` stops it)")
        return 0
    preload = local.preload_default() if args.preload is None else args.preload
    try:
        url = local.up(port=args.port, dashboard_port=args.dashboard_port, num_cpus=args.num_cpus,
                       metrics_port=args.metrics_port, client_port=args.client_port,
                       agent_port=args.agent_port, preload=preload)
    except RuntimeError as e:
        print(f"herd: {e}", file=sys.stderr)
        return 1
    print(f"Ray head up; dashboard at {url} (everything Ray serves listens on 127.0.0.1)")
    if preload:
        print("its prestarted workers have imported torch & co.")
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "token":
        print(f"token auth on: the token is in {os.environ.get('RAY_AUTH_TOKEN_PATH')} (herd uses "
              "it by itself; curl: -H \"Authorization: Bearer $(cat THAT_FILE)\")")
        print("the dashboard asks for that token once per browser: `herd dashboard` says how")
    else:
        print("herd: warning: RAY_AUTH_MODE=disabled: any local user can run code on this cluster",
              file=sys.stderr)
    return 0


def cmd_dashboard(args) -> int:
    from herd import dashboard

    return dashboard.main(args.address, open_browser=args.open, token=args.token, env=args.env)


def cmd_down(args) -> int:
    from herd.teardown import down_cluster

    if args.grace < 0:
        raise UserError(f"--grace must be 0 or more seconds, got {args.grace:g}")
    jobs = down_cluster(args.grace, args.force, say=lambda line: print(line, flush=True))
    if jobs is None:
        print(f"herd: no cluster started by `herd up` on record ({local.cluster_file()}); "
              "nothing stopped (`ray stop` would stop every Ray cluster of this user)",
              file=sys.stderr)
        return 0
    print("Ray stopped (the cluster `herd up` started" + (f"; {len(jobs)} job(s) above)" if jobs else
                                                          "; no job was running)"))
    return 0
