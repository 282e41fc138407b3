"""Bad GGUF files: each becomes one GGUFFileError line naming the file and the cause."""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from app.model.gguf_facts import GGUFFileError, read_model_facts
from tests.gguf_synth import write_not_gguf, write_truncated_gguf, write_zero_bytes

MakeGGUF = Callable[..., Path]


def assert_one_line_error(path: Path, *fragments: str) -> GGUFFileError:
    with pytest.raises(GGUFFileError) as info:
        read_model_facts(path)
    err = info.value
    message = str(err)
    assert isinstance(err, ValueError)
    assert "\n" not in message and "\r" not in message
    assert path.name in message
    assert message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message, message
    return err


def test_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(tmp_path / "absent.gguf", "file not found")


def test_directory(tmp_path: Path) -> None:
    folder = tmp_path / "models.gguf"
    folder.mkdir()
    assert_one_line_error(folder, "directory")


def test_not_gguf(tmp_path: Path) -> None:
    assert_one_line_error(write_not_gguf(tmp_path / "notes.gguf"), "not a GGUF file (starts with b'this is ')")


def test_zero_bytes(tmp_path: Path) -> None:
    assert_one_line_error(write_zero_bytes(tmp_path / "empty.gguf"), "0 bytes")


@pytest.mark.parametrize("fraction", [0.5, 0.9, 0.05, 0.002])
def test_truncated(tmp_path: Path, fraction: float) -> None:
    whole = write_truncated_gguf(tmp_path / "whole.gguf", fraction=1.0)
    full_bytes = whole.stat().st_size
    cut = write_truncated_gguf(tmp_path / "cut.gguf", fraction=fraction)
    cut_bytes = cut.stat().st_size
    err = assert_one_line_error(cut, f"truncated GGUF ({cut_bytes} bytes, needs at least ")
    needed = int(err.cause.rsplit(" ", 1)[1].rstrip(")"))
    assert cut_bytes < needed <= full_bytes


def test_truncated_tensor_data_needs_the_end_of_the_last_tensor(tmp_path: Path) -> None:
    whole = write_truncated_gguf(tmp_path / "whole.gguf", fraction=1.0)
    facts = read_model_facts(whole)
    last_tensor_end = facts.extra["tensor_data_offset_bytes"] + facts.weight_bytes  # tensors are packed in order
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole.read_bytes()[: facts.file_bytes - 100])
    assert_one_line_error(cut, f"needs at least {last_tensor_end})")


@pytest.mark.parametrize("head", [b"GG", b"GGUF\x03\x00\x00\x00\x01"])
def test_truncated_inside_fixed_header(tmp_path: Path, head: bytes) -> None:
    path = tmp_path / "stub.gguf"
    path.write_bytes(head)
    assert_one_line_error(path, f"truncated GGUF ({len(head)} bytes, needs at least 24)")


def test_unsupported_version(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    data = bytearray(make_gguf().read_bytes())
    data[4:8] = struct.pack("<I", 7)
    path = tmp_path / "v7.gguf"
    path.write_bytes(bytes(data))
    assert_one_line_error(path, "unsupported GGUF version 7")


def test_corrupt_header_value_type(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    data = bytearray(make_gguf().read_bytes())
    key_len = struct.unpack_from("<Q", data, 24)[0]
    struct.pack_into("<I", data, 24 + 8 + key_len, 99)  # the first key's value type
    path = tmp_path / "badtype.gguf"
    path.write_bytes(bytes(data))
    assert_one_line_error(path, "corrupt GGUF header (")


def test_corrupt_tensor_type(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    src = make_gguf()
    data = bytearray(src.read_bytes())
    name = b"token_embd.weight"
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    n_dims = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<I", data, at + 4 + 8 * n_dims, 999)  # ggml type of the first tensor
    path = tmp_path / "badtensor.gguf"
    path.write_bytes(bytes(data))
    assert_one_line_error(path, "corrupt GGUF header (")


@pytest.mark.parametrize("key", ["block_count", "embedding_length", "context_length"])
def test_missing_required_key(make_gguf: MakeGGUF, key: str) -> None:
    path = make_gguf(omit_keys=[key])
    assert_one_line_error(path, f"GGUF has no 'llama.{key}' key (unsupported or incomplete model)")


def test_missing_architecture(make_gguf: MakeGGUF) -> None:
    assert_one_line_error(make_gguf(omit_keys=["general.architecture"]), "'general.architecture'")


def test_unknown_architecture_with_foreign_keys(make_gguf: MakeGGUF) -> None:
    # general.architecture says nosucharch but the hyperparameters are under llama.*
    path = make_gguf(extra_kv={"general.architecture": "nosucharch"})
    assert_one_line_error(path, "GGUF has no 'nosucharch.block_count' key")


def test_wrongly_typed_key(make_gguf: MakeGGUF) -> None:
    assert_one_line_error(make_gguf(extra_kv={"llama.block_count": "two"}), "'llama.block_count' is 'two'")


def test_error_pickles_for_the_worker_pipe(tmp_path: Path) -> None:
    err = assert_one_line_error(tmp_path / "absent.gguf")
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == str(err) and copy.path == err.path and copy.cause == err.cause


def test_error_message_stays_one_line_for_odd_causes() -> None:
    err = GGUFFileError("dir/model\nname.gguf", "first line\nsecond line")
    assert "\n" not in str(err)
    assert "model\\nname.gguf" in str(err)
