"""The ``kvexact`` command: a click group whose subcommands (one module each in this package) are
imported on first use, so ``kvexact --help`` and a light subcommand do not import the checker or torch.

Invariant: every subcommand returns an exit code (docs/design.md, "Exit codes"); bad usage prints one line
and exits 2; an internal error (a missing module included) prints one line and exits 3; nothing prints
a traceback unless ``KVEXACT_DEBUG=1``.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

import kvexact

# subcommand -> "module:attribute" of its click command, imported when that subcommand is used
COMMANDS = {
    "check": "kvexact.cli.check:check",
    "prove": "kvexact.cli.prove:prove",
    "conform": "kvexact.cli.conform:conform",
    "diff": "kvexact.cli.diff:diff",
    "fuzz": "kvexact.cli.fuzz:fuzz",
    "gate": "kvexact.cli.gate:gate",
    "validate-trace": "kvexact.cli.validate_trace:validate_trace",
    "formulas": "kvexact.cli.formulas:formulas",
    "negatives": "kvexact.cli.negatives:negatives",
    "prompt-cache": "kvexact.cli.prompt_cache:prompt_cache",
}
BENCHES = {
    "checker": "kvexact.cli.bench:bench_checker",
    "specs": "kvexact.cli.bench_specs:bench_specs",
    "reference": "kvexact.cli.bench:bench_reference",
    "kernels": "kvexact.cli.bench:bench_kernels",
    "events": "kvexact.cli.bench_events:bench_events",
    "mutation": "kvexact.cli.bench_mutation:bench_mutation",
    "parity": "kvexact.cli.bench_parity:bench_parity",
    "fuzz": "kvexact.cli.bench_fuzz:bench_fuzz",
    "gate": "kvexact.cli.bench_gate:bench_gate",
}


def _load(name: str, target: str) -> click.Command:
    module_name, attr = target.split(":")
    command = getattr(importlib.import_module(module_name), attr)
    command.name = name
    return command


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            return _load(cmd_name, self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(getattr(kvexact, "__version__", "unknown"), prog_name="kvexact")
def cli() -> None:
    """kvexact: exact K/V-cache memory, specified in TLA+, model-checked, mirrored and tested."""


@cli.group(cls=LazyGroup, lazy=BENCHES)
def bench() -> None:
    """Benchmarks (separate from tests): checker, specs, reference, kernels, events, mutation, fuzz, gate."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: maps click's outcomes onto kvexact's exit codes."""
    from kvexact.cli.startup import refuse_shadowed_package
    from kvexact.spec.files import WriteFailed

    refuse_shadowed_package()
    try:
        rv = cli.main(args=argv, prog_name="kvexact", standalone_mode=False)
    except click.UsageError as exc:
        hint = ""
        if exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        click.echo(f"kvexact: error: {exc.format_message()}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"kvexact: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("kvexact: interrupted", err=True)
        sys.exit(130)
    except WriteFailed as exc:  # a report, trace or reproduction that could not be written fails the command
        click.echo(f"kvexact: error: {exc}", err=True)
        sys.exit(3)
    except Exception as exc:
        if os.environ.get("KVEXACT_DEBUG") == "1":
            raise
        click.echo(f"kvexact: internal error: {type(exc).__name__}: {exc} (KVEXACT_DEBUG=1 shows the traceback)",
                   err=True)
        sys.exit(3)
    sys.exit(rv if isinstance(rv, int) else 0)
