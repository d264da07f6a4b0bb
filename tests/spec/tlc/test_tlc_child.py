"""The TLC child plumbing with a real JVM: a tiny main class stands in for tlc2.TLC.

The fake TLC is compiled here into a temporary jar. It prints canned ``-tool`` output that it reads
from a resource inside the jar (so the classpath is used), echoes its arguments, and ends with
``System.exit``: the parent must survive and get the exit code and the output back.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import kvexact.spec.tlc as tlc
from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import TlcFailed, TlcUnavailable, resolve_jar, run_java_main, run_tlc

FAKE_TLC = r"""
package fake;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;

public class Tlc {
    public static void main(String[] args) throws Exception {
        int code = Integer.parseInt(System.getProperty("fake.exit", "12"));
        String resource = "/fake/output.txt";
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("-exit")) { code = Integer.parseInt(args[i + 1]); }
            if (args[i].equals("-sleep")) { Thread.sleep(Long.parseLong(args[i + 1])); }
        }
        try (InputStream in = Tlc.class.getResourceAsStream(resource)) {
            System.out.print(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        }
        System.out.println("ARGS " + String.join(" ", args));
        System.out.println("CWD-HAS-SPEC " + new java.io.File("KVFake.tla").exists());
        System.out.flush();
        System.exit(code);
    }
}
"""


@pytest.fixture(scope="module")
def fake_jar(tmp_path_factory, tlc_output) -> str:
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.skip("a JDK (javac, jar) is needed to build the stand-in for TLC")
    root = tmp_path_factory.mktemp("fake_tlc")
    src = root / "src" / "fake"
    src.mkdir(parents=True)
    (src / "Tlc.java").write_text(FAKE_TLC)
    classes = root / "classes"
    subprocess.run(["javac", "-d", str(classes), str(src / "Tlc.java")], check=True)
    (classes / "fake" / "output.txt").write_text(tlc_output["violation"])
    jar = root / "fake-tlc.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return str(jar)


@pytest.mark.parametrize("prefer", ["jpype", "java"])
def test_child_runs_main_from_the_jar_and_the_parent_survives_system_exit(fake_jar, prefer):
    run = run_java_main(fake_jar, "fake.Tlc", ["-exit", "11", "-tool"], prefer=prefer)
    assert run.via == prefer
    assert run.exit_code == 11
    assert "ARGS -exit 11 -tool" in run.stdout
    assert "Invariant NotSolved is violated." in run.stdout  # read from the jar: the classpath is used


def test_missing_class_is_a_nonzero_exit_not_a_crash_of_the_parent(fake_jar):
    run = run_java_main(fake_jar, "fake.Missing", [], prefer="jpype")
    assert run.exit_code != 0


def test_run_tlc_parses_the_child_output_and_is_hermetic(fake_jar, tmp_path):
    spec = tmp_path / "KVFake.tla"
    spec.write_text("---- MODULE KVFake ----\n====\n")
    (tmp_path / "KVFake.cfg").write_text("\n")
    result = run_tlc(spec, None, fake_jar, main_class="fake.Tlc")
    assert result.engine == "tlc" and result.outcome is Outcome.SAFETY and result.exit_code == 12
    assert result.violation.name == "NotSolved" and len(result.violation.trace) == 3
    assert (result.generated_states, result.distinct_states) == (97, 16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["KVFake.cfg", "KVFake.tla"]  # nothing left beside


def test_run_tlc_passes_hermetic_flags(fake_jar, tmp_path, monkeypatch):
    spec = tmp_path / "KVFake.tla"
    spec.write_text("---- MODULE KVFake ----\n====\n")
    (tmp_path / "KVFake.cfg").write_text("\n")
    seen: list[list[str]] = []
    cwd_listing: list[list[str]] = []

    def spy(jar, main_class, args, **kw):
        seen.append(args)
        cwd_listing.append(sorted(p.name for p in kw["cwd"].iterdir()))
        return run_java_main(jar, main_class, [*args, "-exit", "12"], **kw)

    monkeypatch.setattr(tlc, "run_java_main", spy)
    tlc.run_tlc(spec, tmp_path / "KVFake.cfg", fake_jar, main_class="fake.Tlc")
    args = seen[0]
    for flag in ("-tool", "-noTE", "-cleanup", "-metadir"):
        assert flag in args
    assert args[args.index("-workers") + 1] == "1"
    assert args[-1] == "KVFake.tla"
    assert cwd_listing[0] == ["KVFake.tla", "MC_kvexact.cfg"]  # TLC runs in a temporary copy


def test_timeout_is_reported(fake_jar):
    with pytest.raises(TlcFailed, match="did not finish"):
        run_java_main(fake_jar, "fake.Tlc", ["-sleep", "20000"], timeout_s=3, prefer="java")


def test_jar_resolution_names_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("TLA2TOOLS_JAR", raising=False)
    monkeypatch.setattr(tlc, "beside_clone_candidates", lambda: [tmp_path / "shared" / "tla2tools.jar"])
    with pytest.raises(TlcUnavailable, match="TLA2TOOLS_JAR"):
        resolve_jar(None)
    with pytest.raises(TlcUnavailable, match="not found"):
        resolve_jar(tmp_path / "nope.jar")


def test_tlc_bounds_are_refused(tmp_path):
    with pytest.raises(ValueError, match="max-states"):
        run_tlc(Path("X.tla"), None, None, max_states=10)
