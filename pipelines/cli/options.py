"""Every command-line argument understood once, by zerda's parser or by Beam's option classes, or refused.

Beam alone only warns about an option it does not know and runs anyway, so ``--inptu x`` would chunk
the sample corpus and ``--direct_num_worker=2`` would run with one worker. Here the arguments zerda's
parser leaves go to a parser holding every registered ``PipelineOptions`` class (as
``PipelineOptions.get_all_options`` builds it, abbreviations off), after the chosen runner has been
created, so that a runner's own option class (a runner module may define one) counts as well. What is
left is a :class:`UsageError` naming the closest known option; values Beam's classes refuse
(``--direct_num_workers=abc``, ``--direct_running_mode=bogus``), an unknown runner and the runner's own
validation (``--runner DataflowRunner`` without ``--project``) are usage errors too. All of it happens
before anything is read or written.
"""

from __future__ import annotations

import argparse
import difflib
import math
import weakref
from typing import NoReturn, cast

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    PipelineOptions,
    PipelineOptionsT,
    StandardOptions,
    _BeamArgumentParser,
)
from apache_beam.runners.direct.direct_runner import DirectRunner
from apache_beam.runners.runner import PipelineRunner, create_runner

from pipelines.cli.local_runner import FnApiDirectRunner
from pipelines.errors import UsageError
from pipelines.redact import is_secret_name


class _RaisingParser(_BeamArgumentParser):
    """Beam's argument parser with a parse error raised as a UsageError instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def raise_on_error(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` raise UsageError (one line, exit code 2 in ``main``) instead of printing its usage."""

    def error(message: str) -> NoReturn:
        raise UsageError(message)

    parser.error = error  # type: ignore[method-assign]
    return parser


class Once(argparse.Action):
    """An option that takes one value: given twice (``--output a --output b``) is a usage error, not the last one."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, *_: object
    ) -> None:
        if getattr(namespace, f"_{self.dest}_given", False):
            parser.error(f"{self.option_strings[0]} given twice: give it once")
        setattr(namespace, f"_{self.dest}_given", True)
        setattr(namespace, self.dest, values)


def non_empty(value: str) -> str:
    """A path or glob argument: an empty one (``--output ""``, an unset shell variable) would mean the cwd."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty (an unset shell variable?)")
    return value


def seconds(value: str) -> float:
    """A non-negative, finite number of seconds."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {value!r}")
    return number


class _StoreOnce(argparse._StoreAction):
    """A Beam option of one value given twice with two values (``--runner A --runner B``) is a usage error:
    Beam takes the last one, which a scheduler's appended override or a pasted command hides."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object, option: object = None
    ) -> None:
        given, name = f"_{self.dest}_given", option or self.option_strings[0]
        if hasattr(namespace, given) and getattr(namespace, given) != values:
            first, then = getattr(namespace, given), values
            shown = "two values" if is_secret_name(str(name)) else f"{first!r}, then {then!r}"  # a credential's
            raise UsageError(f"{name} given twice ({shown}): give it once")
        setattr(namespace, given, values)
        super().__call__(parser, namespace, values, option)  # type: ignore[arg-type]


def _beam_parser() -> _RaisingParser:
    """Every registered Beam option, one class each, as ``PipelineOptions.get_all_options`` collects them.

    Options of one value refuse two different values (:class:`_StoreOnce`); list options (``--experiments``)
    still take one value each time.
    """
    parser = _RaisingParser(allow_abbrev=False, add_help=False)
    classes: dict[str, type[PipelineOptions]] = {}
    for cls in PipelineOptions.__subclasses__():
        classes.setdefault(str(cls), cls)
    for cls in classes.values():
        cls._add_argparse_args(parser)  # the hook each options class fills in
    for action in parser._actions:
        if type(action) is argparse._StoreAction:
            action.__class__ = _StoreOnce
    return parser


class _ViewOnce(PipelineOptions):
    """Beam's options, each view made once. Beam asks for a view about 550 times while it builds and runs
    zerda's pipeline (a type check, a transform applied), and each new view builds a parser and parses
    the arguments again. Views share one dict of values, so a view kept is the view Beam would make."""

    def view_as(self, cls: type[PipelineOptionsT]) -> PipelineOptionsT:
        views = _VIEWS.setdefault(self, {})  # beside the object, not in it: pickled options stay Beam's
        if cls not in views:
            views[cls] = super().view_as(cls)
        return cast(PipelineOptionsT, views[cls])


_VIEWS: weakref.WeakKeyDictionary[PipelineOptions, dict[type, PipelineOptions]] = weakref.WeakKeyDictionary()


def _runner(beam_args: list[str]) -> PipelineRunner:
    """The runner the arguments name (Beam's default when none): unknown or not installed is a usage error."""
    name = PipelineOptions(beam_args).view_as(StandardOptions).runner or StandardOptions.DEFAULT_RUNNER
    try:
        runner = create_runner(name)
    except (ValueError, ImportError) as err:
        raise UsageError(f"--runner {name}: {err}") from err
    return FnApiDirectRunner() if type(runner) is DirectRunner else runner  # never Prism (see local_runner)


def _unknown_message(unknown: list[str], known: list[str]) -> str:
    """One line for the first argument nobody understood, with the closest option name when there is one."""
    first = unknown[0]
    if not first.startswith("-"):
        return (
            f"unexpected argument {first!r}: quote a glob ('DIR/*.jsonl') so the shell does not expand it into "
            "several words, or give each path its own --input"
        )
    name = first.split("=", 1)[0]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown option {name}{hint}; see --help, or Beam's pipeline options for the runner's own"


def _option_strings(*parsers: argparse.ArgumentParser) -> list[str]:
    return [s for parser in parsers for action in parser._actions for s in action.option_strings if s.startswith("--")]


def parse_arguments(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> tuple[argparse.Namespace, PipelineOptions, PipelineRunner]:
    """zerda's arguments, Beam's options and the runner; UsageError when any argument is not understood."""
    args, beam_args = raise_on_error(parser).parse_known_args(argv)
    beam_values, _ = _beam_parser().parse_known_args(beam_args)  # values Beam's classes refuse, before the runner
    if (beam_values.direct_num_workers or 0) < 0:  # Beam takes any int, then fails deep in the runner
        raise UsageError(f"--direct_num_workers must be >= 0 (0: one a core), got {beam_values.direct_num_workers}")
    if beam_values.job_server_timeout <= 0:  # Beam takes any int; a socket or gRPC wait refuses it later
        raise UsageError(
            f"--job_server_timeout must be a positive number of seconds, got {beam_values.job_server_timeout}"
        )
    if beam_values.streaming:  # the DirectRunner as zerda runs it would ignore it; the commit is a batch job's
        raise UsageError("--streaming: zerda is a batch job (it reads a bounded corpus and commits once, at the end)")
    runner = _runner(beam_args)
    beam_parser = _beam_parser()  # again: creating the runner may have registered its own options class
    _, unknown = beam_parser.parse_known_args(beam_args)
    if unknown:
        raise UsageError(_unknown_message(unknown, _option_strings(parser, beam_parser)))
    return args, _ViewOnce(beam_args), runner


def new_pipeline(options: PipelineOptions, runner: PipelineRunner) -> beam.Pipeline:
    """A pipeline for ``options``; the runner's validation of them (``Pipeline.__init__``) is a usage error."""
    try:
        return beam.Pipeline(runner=runner, options=options)
    except ValueError as err:
        raise UsageError(str(err).replace("\n", " ")) from err
