"""`herd`: the command line of a Herd cluster (also `python -m herd`). The parser and main()
here; the commands, by subject, in cluster_cmds (up, down, dashboard), job_cmds (submit,
status, scale, stop, logs, list), policy_cmds (evaluate, export, plot) and tune_cmds (tune,
precompile). Each command parses its flags and calls the job functions (herd.jobs,
herd.submission) that the Python API calls."""

from __future__ import annotations

import argparse
import signal
import sys

from herd import local
from herd.cli import cluster_cmds, job_cmds, policy_cmds, tune_cmds
from herd.jobs import NotRunning, UserError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="herd", description="Distributed SAC on Ray: actors, gRPC, GPU learner")
    p.add_argument("--address", help="Ray dashboard URL (default $HERD_DASHBOARD_URL, else the "
                   f"one `herd up` started, else {local.DEFAULT_DASHBOARD})")
    sub = p.add_subparsers(dest="cmd", required=True)
    for commands in (cluster_cmds, job_cmds, policy_cmds, tune_cmds):
        commands.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    local.align_auth_mode()
    local.align_loopback()
    if getattr(args, "follow", False) or getattr(args, "watch", 0):
        signal.signal(signal.SIGINT, job_cmds.leave)
    try:
        return args.fn(args)
    except KeyboardInterrupt:  # Ctrl-C in --watch / --follow: leave quietly (the job goes on)
        print(file=sys.stderr)
        return 130
    except NotRunning as e:
        print(f"herd: {e}", file=sys.stderr)
        return 3
    except (UserError, local.NotAuthorized, ConnectionError) as e:
        print(f"herd: {str(e).strip().splitlines()[0]}", file=sys.stderr)
        return 2
