"""``explain --plot`` / ``demo --plot``: the figure file is a real PNG or SVG of the expected size."""

from __future__ import annotations

import struct
import sys
import xml.etree.ElementTree as ET

import pytest

from spyre_rules import cli


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_plot_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "spans.png"
    code, out, _ = run(capsys, "explain", "reduction_input", "--plot", str(path))
    assert code == 0
    assert out.endswith(f"plot: {path}\n")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (700, 500)  # one op: the 7 x 5 inch minimum at 100 dpi


def test_explain_plot_svg_has_one_bar_pair_per_op(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "spans.svg"
    code, out, _ = run(capsys, "explain", "lm_head", "--plot", str(path), "--format", "json")
    assert code == 0
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert (root.get("width"), root.get("height")) == ("504pt", "360pt")  # 7 x 5 inches
    text = path.read_text()
    for label in ("buf1", "buf0", "(0, 16)", "(1, 16)", "grouping.new_run", "grouping.run_tiles_agree",
                  "limit 8,192 B"):
        assert label in text, label


def test_demo_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "demo.png"
    code, out, _ = run(capsys, "demo", "--model", "seed_add", "--out", str(tmp_path / "out"),
                       "--plot", str(path))
    assert code == 0
    assert out.endswith(f"OK\nplot: {path}\n")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_needs_png_or_svg(capsys, tmp_path):
    code, _, err = run(capsys, "explain", "lm_head", "--plot", str(tmp_path / "x.pdf"))
    assert code == 2
    assert "the suffix must be .png or .svg" in err


def test_missing_matplotlib_says_how_to_install_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code, out, err = run(capsys, "explain", "lm_head", "--plot", str(tmp_path / "x.png"))
    assert (code, out) == (2, "")
    assert err == ("spyre-rules explain: error: --plot needs matplotlib, an optional extra: "
                   "pip install 'spyre-rules[plot]' (or pip install matplotlib)\n")
    code, _, err = run(capsys, "demo", "--plot", str(tmp_path / "x.svg"))
    assert code == 2 and "pip install 'spyre-rules[plot]'" in err


def test_plot_extra_is_pinned():
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert pyproject["project"]["optional-dependencies"]["plot"] == ["matplotlib==3.11.2"]
