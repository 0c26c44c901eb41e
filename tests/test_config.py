from __future__ import annotations

import pytest

from spyre_rules import config
from spyre_rules.config import ConfigError


def test_defaults_follow_the_seed():
    assert config.max_span_bytes == 268435456
    assert config.sencores == 32
    # automatic span-overflow tiling is opt-in
    assert config.ignore_span_overflow_hints is True
    assert config.fallback == "eager"


def test_environment_is_read_at_access_time(monkeypatch):
    monkeypatch.setenv("SPYRE_MAX_SPAN_BYTES", "8192")
    monkeypatch.setenv("SPYRE_INDUCTOR_IGNORE_SPAN_OVERFLOW_HINTS", "0")
    assert config.max_span_bytes == 8192
    assert config.ignore_span_overflow_hints is False


def test_patch_overrides_environment_and_nests(monkeypatch):
    monkeypatch.setenv("SENCORES", "4")
    with config.patch(sencores=8):
        assert config.sencores == 8
        with config.patch({"sencores": 2, "max_span_bytes": "4096"}):
            assert config.sencores == 2
            assert config.max_span_bytes == 4096
        assert config.sencores == 8
    assert config.sencores == 4


def test_patch_is_a_decorator():
    @config.patch(unroll_loops=True)
    def inside():
        return config.unroll_loops

    assert inside() is True
    assert config.unroll_loops is False


def test_bad_values_name_the_setting(monkeypatch):
    monkeypatch.setenv("SPYRE_MAX_SPAN_BYTES", "-3")
    with pytest.raises(ConfigError, match=r"SPYRE_MAX_SPAN_BYTES='-3' is invalid for setting 'max_span_bytes'"):
        config.max_span_bytes
    with pytest.raises(ConfigError, match=r"unknown setting 'max_span'"):
        config.patch(max_span=1)
    with pytest.raises(ConfigError, match=r"invalid value 'maybe' for setting 'fallback'"):
        config.patch(fallback="maybe")


def test_settings_are_read_only():
    with pytest.raises(AttributeError, match="patch"):
        config.config.sencores = 3
