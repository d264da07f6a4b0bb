"""The ``kvexact`` command: a click group whose subcommands live in each layer and load lazily.

Invariant: every subcommand returns an exit code (DESIGN.md, "Exit codes"); bad usage prints one line
and exits 2; a subcommand whose layer has not landed says so and exits 3; nothing prints a traceback
unless ``KVEXACT_DEBUG=1``.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

import kvexact

# subcommand -> "module:attribute" of a click command (imported only when that subcommand is used)
COMMANDS = {
    "check": "kvexact.spec.check_cmd:check",
    "prove": "kvexact.conformance.prove_cmd:prove",
    "conform": "kvexact.conformance.conform_cmd:conform",
    "diff": "kvexact.conformance.diff_cmd:diff",
    "fuzz": "kvexact.conformance.fuzz_cmd:fuzz",
    "gate": "kvexact.conformance.gate_cmd:gate",
    "validate-trace": "kvexact.conformance.trace_cmd:validate_trace",
    "formulas": "kvexact.reference.formulas_cmd:formulas",
    "negatives": "kvexact.reference.negatives_cmd:negatives",
}
BENCHES = {
    "checker": "kvexact.spec.bench_cmd:bench_checker",
    "specs": "kvexact.spec.bench_specs_cmd:bench_specs",
    "reference": "kvexact.reference.bench_cmd:bench_reference",
    "kernels": "kvexact.kernels.bench_cmd:bench_kernels",
    "events": "kvexact.conformance.events_bench:bench_events",
}


def _not_available(name: str, target: str) -> click.Command:
    """A stand-in for a subcommand whose module has not landed: it says so and exits 3."""

    @click.command(
        name=name,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        help=f"(not available in this build: {target} is missing)",
    )
    @click.pass_context
    def stub(ctx: click.Context) -> int:
        click.echo(f"kvexact {ctx.command_path.split(' ', 1)[-1]}: not available yet in this build "
                   f"({target} is not installed); nothing was checked", err=True)
        return 3

    return stub


def _load(name: str, target: str) -> click.Command:
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return _not_available(name, module_name)
        raise
    command = getattr(module, attr)
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
@click.version_option(kvexact.__version__, prog_name="kvexact")
def cli() -> None:
    """kvexact: exact K/V-cache memory, specified in TLA+, model-checked, mirrored and tested."""


@cli.group(cls=LazyGroup, lazy=BENCHES)
def bench() -> None:
    """Benchmarks (separate from tests): checker, specs, reference, kernels."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: maps click's outcomes onto kvexact's exit codes."""
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
    except Exception as exc:
        if os.environ.get("KVEXACT_DEBUG") == "1":
            raise
        click.echo(f"kvexact: internal error: {type(exc).__name__}: {exc} (KVEXACT_DEBUG=1 shows the traceback)",
                   err=True)
        sys.exit(3)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
