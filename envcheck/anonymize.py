"""Stable pseudonyms for host and user names, IP and MAC addresses, GPU UUIDs and serials (PCI bus ids stay) in
reports, snapshots and free text: an HMAC-SHA256 under a key made once per user, so one machine keeps its
pseudonyms (``diff`` and ``history`` still match) and nobody without the key can test a guess. A known name is
replaced as a whole word of ``MIN_WORD`` characters that is no ``COMMON_NAMES`` word, and anywhere it can only be
a name (home paths, ``NAME@``, the host field).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from envcheck.errors import UsageError
from envcheck.model import Check, Environment, Fact, Gpu, Report
from envcheck.outside_json import Json

if TYPE_CHECKING:
    from envcheck.snapshot import Snapshot

T = TypeVar("T")

KEY_FILE = "anonymize.key"
KEY_BYTES = 32

# Home folders: Linux, macOS, Windows seen from WSL (/mnt/c/Users/...) and from Windows.
_HOME = re.compile(r"(?P<prefix>/home/|/Users/|/mnt/[A-Za-z]/Users/|[A-Za-z]:\\\\?Users\\\\?)(?P<name>[^/\\\s:'\"<>|]+)")
_NOT_PEOPLE = frozenset({"Public", "Default", "All Users", "Default User", "root", "shared"})
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GPU_UUID = re.compile(rf"\b(?P<kind>GPU|MIG)-(?P<uuid>{_UUID})\b")
# Four dotted numbers not part of a longer dotted or hyphenated word (a kernel release 5.15.153.1-microsoft, a VBIOS
# 94.06.19.00.4a); ``_`` and a dash between digits separate (``run_10.1.2.4_x.log``, ``10.1.2.5-10.1.2.6``).
_IPV4 = re.compile(r"(?<![A-Za-z0-9.])(?<![A-Za-z]-)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})"
                   r"(?![A-Za-z0-9]|\.\d|-[A-Za-z])")
# EC2's host names spell the address with dashes (``ip-10-1-2-3``, ``ip-10-1-2-3.ec2.internal``).
_EC2 = re.compile(r"(?<![A-Za-z0-9])ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(?![0-9])", re.IGNORECASE)
_IPV6 = re.compile(r"(?<![\w:.])(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:])")
_MAC = re.compile(r"(?<![\w:-])(?:[0-9a-fA-F]{2}([:-]))(?:[0-9a-fA-F]{2}\1){4}[0-9a-fA-F]{2}(?![\w:-])")
_SERIAL = re.compile(r"(?P<label>Serial Number\s*:\s*)(?P<serial>[0-9A-Za-z]{6,})")
_SERIAL_KEYS = frozenset({"nvmlDeviceGetSerial", "serial"})
# A shorter name, or one of these words, is replaced only where it can only be a name ("test" is everywhere).
MIN_WORD = 3
COMMON_NAMES = frozenset({
    "admin", "administrator", "build", "cuda", "data", "default", "dev", "docker", "guest", "gpu", "home",
    "host", "jenkins", "linux", "local", "localhost", "main", "node", "nvidia", "opt", "python", "root",
    "runner", "server", "shared", "test", "tmp", "ubuntu", "unknown", "user", "usr", "work", "workspace"})


def _is_word_name(name: str) -> bool:
    return len(name) >= MIN_WORD and name.lower() not in COMMON_NAMES


def key_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "envcheck" / KEY_FILE


def load_key(path: Path | None = None) -> bytes:
    """This user's anonymisation key, made (readable by this user only) on first use."""
    p = path or key_path()
    try:
        return bytes.fromhex(p.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        pass
    except ValueError:
        raise OSError(f"{p} is not an envcheck key (64 hex digits); delete it to make a new one") from None
    p.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load_key(p)  # made by a concurrent envcheck a moment ago
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(key.hex() + "\n")
    return key


def command_key() -> bytes:
    """``load_key`` for a command with ``--anonymize``, called before any work: one line, not a late traceback."""
    try:
        return load_key()
    except OSError as e:
        raise UsageError("error.anonymize_key", error=e) from None


class Anonymizer:
    """Pseudonyms under one key for ``hosts``, ``users`` and ``homes`` (home folders wherever they are)."""

    def __init__(self, key: bytes, hosts: Iterable[str] = (), users: Iterable[str] = (),
                 homes: Iterable[str] = ()) -> None:
        self._key = key
        named = {h for h in hosts if h and h not in ("unknown", "localhost")}
        # A fully qualified name is also written short (logs, prompts, NCCL's "node1:1234:1234" lines).
        named |= {h.split(".", 1)[0] for h in named if "." in h and not _IPV4.fullmatch(h)} - {""}
        self.hosts = sorted(named, key=len, reverse=True)
        self.users = sorted({u for u in users if u and u not in _NOT_PEOPLE}, key=len, reverse=True)
        self.homes = sorted({h.rstrip("/") for h in homes if _is_home(h)}, key=len, reverse=True)

    def _digest(self, kind: str, value: str) -> str:
        return hmac.new(self._key, f"{kind}\0{value}".encode(), hashlib.sha256).hexdigest()

    def pseudonym(self, kind: str, value: str) -> str:
        """``host-5c1e09a2d4``: the same (key, kind, value) always gives the same pseudonym."""
        return f"{kind}-{self._digest(kind, value)[:10]}"

    def host(self, name: str) -> str:
        return name if name in ("", "unknown") else self.pseudonym("host", name)

    def _uuid(self, kind: str, uuid: str) -> str:
        h = self._digest(kind, uuid.lower())
        return f"{kind}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def _address(self, text: str, original: str) -> str:
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            return original
        return original if addr.is_loopback or addr.is_unspecified else self.pseudonym("ip", str(addr))

    def _ipv4(self, m: re.Match[str]) -> str:
        return self._address(".".join(str(int(g)) for g in m.groups()), m.group(0))

    def _ipv6(self, m: re.Match[str]) -> str:
        text = m.group(0)
        # Times (13:18:48) and the like are not addresses: demand "::" or eight groups, then a valid parse.
        return text if "::" not in text and text.count(":") < 7 else self._address(text, text)

    def _home(self, m: re.Match[str]) -> str:
        name = m.group("name")
        return m.group(0) if name in _NOT_PEOPLE else m.group("prefix") + self.pseudonym("user", name)

    def text(self, text: str) -> str:
        """``text`` with every identifying item replaced (see the module docstring)."""
        if not text:
            return text
        text = _GPU_UUID.sub(lambda m: self._uuid(m.group("kind"), m.group("uuid")), text)
        text = _SERIAL.sub(lambda m: m.group("label") + self.pseudonym("serial", m.group("serial")), text)
        text = _HOME.sub(self._home, text)
        for home in self.homes:
            parent, name = home.rsplit("/", 1)
            text = re.sub(rf"(?<![\w.-]){re.escape(home)}(?![\w.-])", f"{parent}/{self.pseudonym('user', name)}", text)
        text = _MAC.sub(lambda m: self.pseudonym("mac", m.group(0).lower().replace("-", ":")), text)
        text = _EC2.sub(self._ipv4, text)
        text = _IPV4.sub(self._ipv4, text)
        text = _IPV6.sub(self._ipv6, text)
        # In any case (NCCL upper-cases host names), and in file names, where ``_`` separates (alice_matmul.py).
        for user in self.users:
            where = rf"(?<![A-Za-z0-9]){re.escape(user)}(?![A-Za-z0-9])" if _is_word_name(user) else \
                rf"(?<![\w.-]){re.escape(user)}(?=@)"
            text = re.sub(where, self.pseudonym("user", user), text, flags=re.IGNORECASE)
        for host in self.hosts:
            if _is_word_name(host) or "." in host or "-" in host:
                text = re.sub(rf"(?<![A-Za-z0-9.-]){re.escape(host)}(?![A-Za-z0-9-])", self.host(host), text,
                              flags=re.IGNORECASE)
        return text

    def value(self, value: Json, key: str | None = None) -> Json:
        """JSON-like data with every string (keys too) passed through :meth:`text`; a serial is replaced whole."""
        if isinstance(value, str):
            return self.pseudonym("serial", value) if key in _SERIAL_KEYS and value not in ("", "N/A") else \
                self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if isinstance(value, tuple):
            return tuple(self.value(v, key) for v in value)
        return value

    def fact(self, fact: Fact) -> Fact:
        return Fact(value=self.value(fact.value), reason=self.text(fact.reason) if fact.reason else fact.reason)

    def environment(self, env: Environment) -> Environment:
        sections = {name: {k: self.fact(f) for k, f in facts.items()} for name, facts in env.sections.items()}
        gpus = tuple(Gpu(g.index, {k: self.fact(f) for k, f in g.facts.items()},
                         lost=self.text(g.lost) if g.lost else g.lost) for g in env.gpus)
        return dataclasses.replace(env, sections=sections, gpus=gpus)

    def check(self, check: Check) -> Check:
        return dataclasses.replace(
            check, finding=self.text(check.finding),
            fix=self.text(check.fix) if check.fix else check.fix,
            details=self.text(check.details) if check.details else check.details,
            # The parameters are the machine's words (paths, names, errors) that the sentences are built from.
            params={k: self.text(v) for k, v in check.params.items()})

    def model(self, obj: T) -> T:
        """A part of a report with every string anonymised (a bare ``uuid`` field as a GPU UUID, ``host`` fields)."""
        return cast(T, self._walk(obj, None))

    def _walk(self, obj: object, field_name: str | None) -> object:
        if isinstance(obj, Fact):
            return self.fact(obj)
        if isinstance(obj, Environment):
            return self.environment(obj)
        if isinstance(obj, str):
            if field_name == "uuid" and re.fullmatch(_UUID, obj):
                return self._uuid("GPU", obj)[len("GPU-"):]
            if field_name == "host":
                return self.host(obj)
            return self.value(obj, field_name)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            changes = {f.name: self._walk(getattr(obj, f.name), f.name) for f in dataclasses.fields(obj)}
            return dataclasses.replace(obj, **changes)
        if isinstance(obj, tuple):
            return tuple(self._walk(x, field_name) for x in obj)
        if isinstance(obj, dict):
            return {k: self._walk(v, k) for k, v in obj.items()}
        return obj

    def report(self, report: Report) -> Report:
        """``report`` anonymised: host, environment, checks, every bench, node, fleet, burn and cross-check section."""
        return dataclasses.replace(
            report, host=self.host(report.host), environment=self.environment(report.environment),
            checks=tuple(self.check(c) for c in report.checks), benches=self.model(report.benches),
            node=self.model(report.node), fleet=self.model(report.fleet), burn=self.model(report.burn),
            crosscheck=self.model(report.crosscheck), anonymized=True)


def _home_name(home: str) -> str:
    """The user-name part of a home folder (``/scratch/u/bob`` -> ``bob``); "" for ``/``, ``/root`` and the like."""
    home = str(home or "").rstrip("/")
    name = home.rsplit("/", 1)[-1] if home.startswith("/") and home.count("/") >= 2 else ""
    return "" if name in _NOT_PEOPLE else name


def _is_home(home: str) -> bool:
    """A home folder whose path is worth replacing: any absolute folder but ``/`` (``/root`` says whose files)."""
    home = str(home or "").rstrip("/")
    return home.startswith("/") and len(home) > 1


def users_in(environ: Mapping[str, object]) -> set[str]:
    """User names a recorded environment names (USER, LOGNAME, USERNAME, the last part of HOME wherever it is)."""
    found = {str(environ[k]) for k in ("USER", "LOGNAME", "USERNAME") if environ.get(k)}
    home = str(environ.get("HOME") or "")
    if home.startswith(("/home/", "/Users/")) or (_home_name(home) and _home_name(home) in found):
        found.add(home.rstrip("/").rsplit("/", 1)[-1])
    return found


def homes_in(environ: Mapping[str, object]) -> list[str]:
    """The home folder a recorded environment names, wherever it lives (``/root`` included)."""
    home = str(environ.get("HOME") or "")
    return [home] if _is_home(home) else []


def own_home() -> list[str]:
    """The running user's home as the password database has it (``HOME`` may be unset or point elsewhere)."""
    try:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):  # no pwd module (Windows), a uid with no entry (containers)
        return []
    return [home] if _is_home(home) else []


def for_this_machine(host: str, key: bytes | None = None) -> Anonymizer:
    """An anonymizer for this machine's reports: its host name, the user running envcheck and their home."""
    return Anonymizer(key if key is not None else load_key(), hosts=[host], users=users_in(os.environ),
                      homes=[*homes_in(os.environ), *own_home()])


def anonymize_snapshot(snap: Snapshot, anonymizer: Anonymizer) -> Snapshot:
    """A snapshot anonymised alike in file names and contents, so it still replays."""
    meta = dict(snap.meta)
    host = str(meta.get("host") or "")
    environ = snap.host.get("environ") or {}
    anonymizer = Anonymizer(anonymizer._key, hosts=[*anonymizer.hosts, host],
                            users=[*anonymizer.users, *users_in(environ)],
                            homes=[*anonymizer.homes, *homes_in(environ)])
    sources = meta.pop("sources", None)
    meta = anonymizer.value(meta)
    meta["host"] = anonymizer.host(host) if host else host
    if sources is not None:
        meta["sources"] = sources
    meta["anonymized"] = True
    return dataclasses.replace(snap, meta=meta, host=anonymizer.value(snap.host), nvml=anonymizer.value(snap.nvml))
