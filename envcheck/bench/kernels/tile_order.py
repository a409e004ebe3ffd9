"""The order in which a matmul's programs visit output tiles (shared by every matmul kernel)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Tile ``tile``'s (row, column) when GROUP_M-tall groups of tile rows are swept column by column, so
    consecutive tiles share A and B panels while they are still in L2."""
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (tile // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile % num_pid_in_group) % group_size_m)
    pid_n = (tile % num_pid_in_group) // group_size_m
    return pid_m, pid_n
