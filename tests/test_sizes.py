"""``--sizes`` parsing: element counts, binary multiples, matrix shapes, one-line errors."""

from __future__ import annotations

import pytest

from envcheck import units
from envcheck.bench import suite as sizes
from envcheck.errors import UsageError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1024", (1024,)),
        ("2^20", (1 << 20,)),
        ("2**20", (1 << 20,)),
        ("1M", (1 << 20,)),
        ("1m", (1 << 20,)),
        ("4K", (4096,)),
        ("1G", (1 << 30,)),
        ("1e6", (1_000_000,)),
        ("1_000_000", (1_000_000,)),
        ("10240", (10240,)),
        ("4096x4096", (4096, 4096)),
        ("4096X1024", (4096, 1024)),
        ("4096x11008x4096", (4096, 11008, 4096)),
        ("4Kx11008x4K", (4096, 11008, 4096)),
        (" 512 ", (512,)),
    ],
)
def test_parse_size(text, expected):
    assert sizes.parse_size(text) == expected


@pytest.mark.parametrize(
    "text, detail",
    [
        ("abc", "'abc' is not a size"),
        ("0", "must be positive"),
        ("2^0x0", "must be positive"),
        ("1x2x3x4", "not a size"),
        ("4096x", "not a size"),
        ("1.5M", "not a size"),
        ("2^99", "too large"),
        ("1e3.5", "not a size"),
        ("-5", "not a size"),
    ],
)
def test_junk_is_a_one_line_usage_error_with_examples(text, detail):
    with pytest.raises(UsageError) as e:
        sizes.parse_size(text)
    msg = str(e.value)
    assert msg.startswith("--sizes: ") and detail in msg and "examples: 1024, 2^20, 1M" in msg
    assert "\n" not in msg


def test_parse_sizes_keeps_order_and_drops_duplicates():
    assert sizes.parse_sizes(["1M", "1024", "2^20", "512x512x512"]) == ((1 << 20,), (1024,), (512, 512, 512))


@pytest.mark.parametrize(
    "op, size, square, expected",
    [
        ("vector_add", (1024,), False, (1024,)),
        ("relu", (4096, 4096), False, None),
        ("softmax", (4096, 1024), False, (4096, 1024)),
        ("row_sum", (4096,), True, None),
        ("matmul", (4096,), True, (4096, 4096, 4096)),
        ("matmul", (4096,), False, None),
        ("matmul", (4096, 11008, 4096), False, (4096, 11008, 4096)),
        ("matmul", (64, 64), True, None),
    ],
)
def test_shape_for(op, size, square, expected):
    assert sizes.shape_for(op, size, matmul_square=square) == expected


def test_a_progress_line_writes_a_size_as_the_tables_do():
    assert [units.shape(s) for s in [(1024,), (1 << 20,), (102400,), (8, 4)]] == ["1K", "1M", "100K", "8×4"]
