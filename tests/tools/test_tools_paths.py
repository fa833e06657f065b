"""Workspace confinement: resolve_in_workspace and every way out of the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from countbot_cli.tools.paths import display_path, resolve_in_workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


def test_relative_path_inside(ws: Path) -> None:
    path, inside = resolve_in_workspace("src/a.py", ws)
    assert path == (ws / "src" / "a.py").resolve()
    assert inside


def test_workspace_itself_is_inside(ws: Path) -> None:
    assert resolve_in_workspace(".", ws) == (ws.resolve(), True)


def test_dotdot_escape_is_outside(ws: Path) -> None:
    path, inside = resolve_in_workspace("../../etc/passwd", ws)
    assert not inside
    assert path == (ws.parent.parent / "etc" / "passwd").resolve()


def test_dotdot_that_stays_inside_is_inside(ws: Path) -> None:
    assert resolve_in_workspace("src/../src/a.py", ws)[1]


def test_absolute_path_outside(ws: Path) -> None:
    path, inside = resolve_in_workspace("/etc/passwd", ws)
    assert (path, inside) == (Path("/etc/passwd").resolve(), False)


def test_absolute_path_inside(ws: Path) -> None:
    assert resolve_in_workspace(str(ws / "src" / "a.py"), ws)[1]


def test_symlinked_file_pointing_out_is_outside(ws: Path) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "secret.txt")
    path, inside = resolve_in_workspace("link.txt", ws)
    assert path == (ws.parent / "secret.txt").resolve()
    assert not inside


def test_new_file_under_symlinked_dir_pointing_out_is_outside(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (ws / "out").symlink_to(tmp_path / "elsewhere")
    path, inside = resolve_in_workspace("out/new/file.txt", ws)
    assert path == (tmp_path / "elsewhere" / "new" / "file.txt").resolve()
    assert not inside


def test_dotdot_after_symlink_follows_the_link_like_the_os(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (ws / "jump").symlink_to(tmp_path / "a" / "b")
    # the OS resolves jump/.. to tmp/a, not to the workspace
    path, inside = resolve_in_workspace("jump/../x.txt", ws)
    assert path == (tmp_path / "a" / "x.txt").resolve()
    assert not inside


def test_symlink_inside_pointing_inside_is_inside(ws: Path) -> None:
    (ws / "alias").symlink_to(ws / "src")
    path, inside = resolve_in_workspace("alias/a.py", ws)
    assert inside and path == (ws / "src" / "a.py").resolve()


def test_sibling_folder_sharing_the_name_prefix_is_outside(ws: Path) -> None:
    evil = ws.parent / (ws.name + "-evil")
    evil.mkdir()
    (evil / "x.txt").write_text("x")
    assert str(evil).startswith(str(ws))  # the classic string-prefix trap
    assert not resolve_in_workspace(str(evil / "x.txt"), ws)[1]
    assert not resolve_in_workspace(f"../{ws.name}-evil/x.txt", ws)[1]


def test_workspace_given_through_a_symlink(ws: Path, tmp_path: Path) -> None:
    alias = tmp_path / "ws-alias"
    alias.symlink_to(ws)
    assert resolve_in_workspace("src/a.py", alias)[1]
    assert resolve_in_workspace(str(ws / "src" / "a.py"), alias)[1]


def test_nonexistent_nested_path_inside(ws: Path) -> None:
    path, inside = resolve_in_workspace("new/deeper/file.txt", ws)
    assert inside and path == ws.resolve() / "new" / "deeper" / "file.txt"


def test_symlink_loop_does_not_hang(ws: Path) -> None:
    (ws / "loop1").symlink_to(ws / "loop2")
    (ws / "loop2").symlink_to(ws / "loop1")
    _, inside = resolve_in_workspace("loop1/x", ws)
    assert isinstance(inside, bool)


def test_nul_byte_is_rejected(ws: Path) -> None:
    with pytest.raises(ValueError, match="NUL byte"):
        resolve_in_workspace("src/a.py\x00.txt", ws)


def test_empty_path_is_rejected(ws: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        resolve_in_workspace("  ", ws)


def test_tilde_means_home_and_is_outside(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    path, inside = resolve_in_workspace("~/notes.txt", ws)
    assert path == home.resolve() / "notes.txt"
    assert not inside


def test_display_path(ws: Path) -> None:
    assert display_path((ws / "src" / "a.py").resolve(), ws) == os.path.join("src", "a.py")
    assert display_path(ws.resolve(), ws) == "."
    assert display_path(Path("/etc/passwd"), ws) == "/etc/passwd"
