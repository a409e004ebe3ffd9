"""The ops a user declared (``FILE.py``: every top-level ``Op`` or list of them; or ``module:object``), found in a
child with a time limit, as importing their file runs their code: ``{"ops": [OpSpec, ...]}`` or ``{"error":
"<one line>"}``, anything else one ``UsageError`` line. The worker imports the source again (``CODE``)."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.errors import UsageError, one_line
from envcheck.model import Environment, build, to_dict
from envcheck.ops import OpSpec
from envcheck.userbench.api import DeclarationError, Op

if TYPE_CHECKING:
    from envcheck.bench.suite import Plan

DISCOVER_TIMEOUT_S = 120.0
MODULE_OBJECT = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")
MAX_LINE = 300
STOP_GRACE_S = 2.0  # SIGTERM, then SIGKILL: plain Python importing a file needs no longer
CODE = "envcheck.userbench.code:user_code"  # what makes a declared op's code in the worker


def source_argument(text: str) -> str:
    """``FILE.py`` (made absolute: the worker may import it from anywhere) or ``module:object``."""
    if MODULE_OBJECT.match(text) and not text.endswith(".py"):
        return text
    path = Path(text).expanduser()
    if not path.exists():
        raise UsageError("error.source_missing", source=text)
    if not path.is_file():
        raise UsageError("error.source_not_file", source=text)
    if path.suffix != ".py":
        raise UsageError("error.source_not_python", source=text)
    return str(path.resolve())


def _ops_in(value: object) -> list[Op] | None:
    if isinstance(value, Op):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Op) for v in value):
        return list(value)
    return None


def load(source: str) -> list[Op]:
    """The ops ``source`` declares, in the order it declares them (imports the user's code)."""
    if source.endswith(".py"):
        path = Path(source)
        # The file's folder first on the path, as `python FILE.py` would have it: its own
        # modules (a kernels.py beside it) import.
        sys.path.insert(0, str(path.parent))
        name = "envcheck_user_" + re.sub(r"\W", "_", path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise DeclarationError(f"{source}: cannot be imported as a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        ops: list[Op] = []
        for key, value in vars(module).items():
            if not key.startswith("_") and (found := _ops_in(value)):
                ops += [op for op in found if op not in ops]
        if not ops:
            raise DeclarationError(f"{path.name} declares no envcheck.userbench.Op at its top level")
    else:
        module_name, attr = source.split(":")
        if os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())  # last (a child has it there already): never shadowing the standard library
        module = importlib.import_module(module_name)
        if not hasattr(module, attr):
            raise DeclarationError(f"module {module_name} has no {attr!r}")
        if not (ops := _ops_in(value := getattr(module, attr)) or []):
            raise DeclarationError(f"{source} is not an envcheck.userbench.Op or a list of them "
                                   f"(it is {type(value).__name__})")
    names = [op.name for op in ops]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise DeclarationError(f"two ops are named {dup!r}")
    return ops


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f"{Path(exc.filename).name}, line {exc.lineno}" if exc.filename else f"line {exc.lineno}"
        line = f"SyntaxError: {exc.msg} ({where})"
    elif isinstance(exc, DeclarationError):
        line = str(exc)
    else:
        return one_line(exc, MAX_LINE)
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def child(source: str, out: object) -> dict[str, object]:
    """In the child: the declared ops' specs, or the one line saying why there are none."""
    try:
        return {"ops": [to_dict(op.spec()) for op in load(source)]}
    except BaseException as e:  # noqa: BLE001 - any failure of the user's code is the answer
        return {"error": _one_line(e)}


def discover(source: str, timeout: float = DISCOVER_TIMEOUT_S) -> tuple[OpSpec, ...]:
    """The declared ops' ``OpSpec`` values, from a bounded child; UsageError (one line) otherwise."""
    from envcheck.harness import failures as f
    from envcheck.harness.env import user_path
    from envcheck.harness.spawn import spawn
    got = spawn("envcheck.userbench.discover:child", source, timeout=timeout, heartbeat=timeout,
                grace_s=STOP_GRACE_S, paths=user_path())
    answer = got.result if got.done else None
    if isinstance(got.failure, f.Stopped):
        raise KeyboardInterrupt(got.failure.signal)
    if isinstance(got.failure, f.SpawnFailed):
        raise UsageError("error.source_start", source=source, error=got.failure.error)
    if isinstance(got.failure, (f.Timeout, f.Hang)) and not got.done:
        raise UsageError("error.source_timeout", source=source, limit=f"{timeout:g}")
    if not isinstance(answer, dict):
        last, code = got.last_words or "", got.returncode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        raise UsageError(f"error.source_ended{'.said' if last else ''}", source=source, how=how, said=last[:200])
    if "error" in answer:
        raise UsageError("error.flag", flag=source, error=answer["error"])
    try:
        return tuple(build(OpSpec, s) for s in answer["ops"])
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError("error.source_unreadable", source=source, error=e) from None


def plan(ops: tuple[OpSpec, ...], source: str, quick: bool, device: int, env: Environment,
         interpret: bool = False) -> Plan:
    """The cases of ``envcheck bench``: every declared (op, dtype, shape) and implementation, the baseline first.
    ``interpret``: the worker inherits ``TRITON_INTERPRET=1`` (on the CPU Triton runs interpreted: no speeds)."""
    from envcheck.bench import suite

    base = dataclasses.replace(suite.frame(quick, device, env, tuple(op.name for op in ops)),
                               ops=ops, source=source, code=CODE)
    if base.backend is None:
        return base
    impls = tuple(dict.fromkeys(i for op in ops for i in op.impls))
    settings = dataclasses.replace(base.settings, impls=impls, interpret=interpret and base.backend == "cpu")
    planned = [suite.PlannedCase(op.name, impl, cost.dtype, cost.dtype, cost.shape)
               for op in ops for cost in (op.declared.costs if op.declared else ())
               for impl in (op.baseline, *(i for i in op.impls if i != op.baseline))]
    specs = {op.name: op for op in ops}
    return dataclasses.replace(suite.with_cases(base, planned, env, specs.__getitem__), settings=settings)
