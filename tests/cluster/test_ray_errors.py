"""herd.ray_errors: the one line a user reads of an actor's error and of a failed job's logs."""

import traceback

from ray.exceptions import ActorDiedError, RayTaskError

from herd.ray_errors import cause_line, failure_line, init_error


def test_a_failed_init_is_its_exception_s_last_line():
    try:
        raise ValueError("learner.compile_options: torch._inductor has no setting 'nope'")
    except ValueError as cause:  # as Ray builds it: the formatted traceback, then the cause
        task = RayTaskError("Learner.__init__", traceback.format_exc(), cause)
    e = ActorDiedError(task)
    assert e.actor_init_failed and "\n" in str(e)  # Ray's message carries the traceback
    assert init_error(e) == "ValueError: learner.compile_options: torch._inductor has no setting 'nope'"


def test_any_other_actor_error_is_its_first_line():
    e = ActorDiedError()
    assert not e.actor_init_failed
    assert init_error(e) == str(e).splitlines()[0]


def test_the_driver_s_reason_wins_over_lines_logged_after_it():
    logs = ("[herd] job x: starting\nherd: the learner could not start: ValueError: bad\n"
            "(Learner pid=1) *** SIGABRT received ***\n(Learner pid=1) stack frame\n\n")
    assert failure_line(logs) == "herd: the learner could not start: ValueError: bad"
    assert failure_line("a\nb\n") == "b"
    assert failure_line("  \n") is None


def test_a_method_s_error_is_its_type_and_first_line():
    try:
        raise ValueError("learner.compile_options: torch._inductor has no setting 'nope'\nmore")
    except ValueError as cause:
        e = RayTaskError("Learner.address", traceback.format_exc(), cause)
    assert cause_line(e) == "ValueError: learner.compile_options: torch._inductor has no setting 'nope'"
