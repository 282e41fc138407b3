"""Issue #54 item 8: what ``choose`` (and ``predict``, for ``--ram``) is asked must be answerable. A prompt and
output that do not fit the context were accepted (``--ctx 512 -p 100000`` printed ``llama-server -c 512`` with decode
"at depth 100,064"); ``--ram`` was silently ignored for this machine's CPU and for unified memory; several contexts
read the whole machine again for each."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.choose.chooser import ChooseRequest, run_choose
from app.cli.main import main
from app.predict.answer import Machine
from tests.predict.answer_helpers import HOST


def _one_line_refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["choose", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gguf-bench: error: ") and "\n" not in err, err
    return err


def test_a_prompt_and_output_beyond_the_context_are_refused_in_one_line(
        make_gguf, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    path = str(make_gguf())
    err = _one_line_refusal([path, "--ctx", "512", "-p", "100000"], capsys)
    assert "-p 100,000 and -n 128 make 100,128 tokens, more than --ctx 512 holds" in err
    # the default prompt is the context less the output: an output as long as the context leaves none
    err = _one_line_refusal([path, "--ctx", ",".join(str(n) for n in range(1, 17)), "--ram", "8"], capsys)
    assert "-n 128 generated tokens and a prompt of at least 1 do not fit --ctx 1" in err
    with pytest.raises(ValueError, match="more than --ctx 512 holds"):  # the window asks run_choose itself
        run_choose(ChooseRequest(sources=(path,), n_ctx=512, n_prompt=100_000), machine=Machine())


def test_ram_is_refused_where_the_model_is_not_beside_a_discrete_gpu(
        make_gguf, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    path = str(make_gguf())
    err = _one_line_refusal([path, "--hw", "M3 Max", "--ram", "8", "--ctx", "4096"], capsys)
    assert "--ram is the system RAM beside a discrete GPU; Apple M3 Max holds the model in its unified memory" in err
    with pytest.raises(ValueError, match="holds the model in this machine's system RAM"):  # this machine's CPU
        run_choose(ChooseRequest(sources=(path,), n_ctx=4096, ram_gib=8), machine=Machine(cpu=HOST, cpu_model="x"))
    report = run_choose(ChooseRequest(sources=(path,), hw="RTX 4060 Laptop", n_ctx=4096, ram_gib=8),
                        machine=Machine())
    assert report.profile.host_ram_gib == 8 and report.profile.host_ram_source == "given"  # a discrete GPU: applied


def test_several_contexts_look_at_the_machine_once(make_gguf, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """Each context loaded the machine again (its profiles, saved fit, stored rows and the public fit)."""
    calls: list[int] = []
    real = Machine.elsewhere.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Machine], **kwargs: object) -> Machine:
        calls.append(1)
        return real(cls, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Machine, "elsewhere", classmethod(counted))
    path = str(make_gguf())
    assert main(["choose", path, "--hw", "RTX 4060 Laptop", "--ctx", "1024,4096", "--json"]) == 0
    assert len(calls) == 1
    assert '"contexts"' in capsys.readouterr().out


def test_nothing_is_read_before_the_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal comes first: a source that does not exist is not even looked at."""
    err = _one_line_refusal([str(tmp_path / "missing.gguf"), "--ctx", "64"], capsys)
    assert "do not fit --ctx 64" in err


def test_predict_refuses_ram_where_the_model_is_not_beside_a_discrete_gpu(
        make_gguf, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """``predict --ram`` (the same rule, app.predict.profiles.with_given_ram): ignored for unified memory, and for
    this machine's CPU it dropped the OS's share from the budget."""
    from app.predict.profiles import cpu_profile, with_given_ram

    assert main(["predict", "-m", str(make_gguf()), "--hw", "M3 Max", "--ram", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gguf-bench: error: --ram is the system RAM beside a discrete GPU; Apple M3 Max") and \
        "\n" not in err, err
    cpu = cpu_profile("CPU: test", 40.0, 400.0, 32 * 2**30)
    assert with_given_ram(cpu, None) is cpu
    with pytest.raises(ValueError, match="CPU: test holds the model in this machine's system RAM \\(32.0 GiB\\)"):
        with_given_ram(cpu, 8)
