"""The span check of a collective step's buffers and the chunks that make them fit
(codegen/collective_spans.py), on layouts alone: no process group needed."""

from __future__ import annotations

import torch

from spyre_rules.codegen.collective_spans import (Chunking, CollectiveBuffer, chunk_dims,
                                                  collective_checks, plan_chunks)
from spyre_rules.facts.tiled_layout import fixed_tiled_layout

MIB = 1024 * 1024


def _buffer(name, size, dtype=torch.float16, is_input=True):
    return CollectiveBuffer(name, fixed_tiled_layout("cpu", dtype, size), is_input)


def test_a_70b_all_reduce_at_32768_runs_in_two_chunks_of_rows():
    # (1, 32768, 8192) fp16: device [32768, 128, 1, 64], the token dim spans 512 MiB
    buf = [_buffer("buf8", [1, 32768, 8192]), _buffer("buf8", [1, 32768, 8192], is_input=False)]
    (whole,) = collective_checks("buf9", "all_reduce_", buf, None, 256 * MIB)
    assert [(d.tensor, d.access, d.device_dim, d.span_bytes) for d in whole.overflows] == [
        ("buf8", "read", 0, 512 * MIB), ("buf8", "write", 0, 512 * MIB)]
    chunking = plan_chunks("all_reduce_", buf, 256 * MIB)
    assert chunking == Chunking(dim=1, length=16384, count=2)
    (chunked,) = collective_checks("buf9", "all_reduce_", buf, chunking, 256 * MIB)
    assert chunked.overflows == [] and chunked.max_span_bytes == 256 * MIB


def test_a_buffer_that_fits_needs_no_chunks():
    assert plan_chunks("all_reduce_", [_buffer("b", [1, 8192, 8192])], 256 * MIB) is None


def test_gather_and_scatter_are_never_cut_along_dim_0():
    assert chunk_dims("all_gather_into_tensor", 3) == [1, 2]
    assert chunk_dims("reduce_scatter_tensor", 2) == [1]
    assert chunk_dims("all_reduce_", 2) == [0, 1]
    assert chunk_dims("all_to_all_single", 2) == []  # not chunkable: its whole buffers stand


def test_no_single_dim_chunking_fits_keeps_the_whole_buffer():
    # (64, 96) fp32 at 4 KiB: one stick column of all 64 rows is already 8 KiB, and a row
    # chunk still spans every stick column: no one-dim cut fits
    buf = [_buffer("b", [64, 96], torch.float32)]
    assert plan_chunks("all_reduce_", buf, 4096) is None
    assert plan_chunks("all_reduce_", buf, 8192) == Chunking(dim=1, length=32, count=3)


def test_an_all_gather_chunk_fits_in_its_input_and_its_gathered_output():
    buf = [_buffer("in", [64, 64], torch.float32),
           _buffer("out", [128, 64], torch.float32, is_input=False)]
    assert plan_chunks("all_gather_into_tensor", buf, 16384) == Chunking(dim=1, length=32, count=2)
