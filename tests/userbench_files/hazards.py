"""A user's file whose implementations fail in every way a user's code can: envcheck bench must
report each as that case's failure with its cause, and measure everything else."""

import os
import sys
import time

import torch

from envcheck.userbench import Op


def inputs(shape, dtype, device, generator):
    return (torch.randn(*shape, generator=generator, device=device).to(dtype),)


def _op(name, bad, **over):
    fields = dict(name=name, impls={"torch": lambda x: x * 2, "bad": bad}, reference=lambda x: x * 2,
                  inputs=inputs, shapes=[(256,)], bytes=lambda s, d: 8 * s[0])
    return Op(**{**fields, **over})


def _raises(x):
    raise RuntimeError("kernel exploded")


def _dies(x):
    print("about to die", file=sys.stderr, flush=True)
    os._exit(3)


def _hangs(x):
    time.sleep(3600)


def _bad_inputs(shape, dtype, device, generator):
    raise ValueError("no inputs today")


OPS = [
    _op("fine", lambda x: x + x),
    _op("raises", _raises),
    _op("lazy_import", "no_such_module_for_envcheck:kernel"),
    _op("crashes", _dies),
    _op("hangs", _hangs),
    _op("bad_inputs", lambda x: x + x, inputs=_bad_inputs),
    _op("wrong_shape", lambda x: x[:-1] * 2),
]
