"""Credentials out of every text a person or a log sees (stdlib only).

`ci_register` echoes command lines that may carry a history URL, and `gates` prints
history locations and errors; both mask through `mask_secrets` (ci_register never imports
gates, so it lives here).
"""

from __future__ import annotations

import re
import sys

__all__ = ["GuardedStream", "clean_text", "guarded_output", "mask_secrets", "neutralise_line",
           "raw_stream"]

# A URL's scheme; its userinfo is read by `_mask_userinfo` (no regex backtracking).
_SCHEME = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://")
_URL_END = re.compile(r"[\s\"'<>`]|$")
# A user name alone that is a credential (``https://TOKEN@github.com``): a known token
# shape, or a long run of token characters.
_TOKEN_USER = re.compile(r"[A-Za-z0-9_-]{24,}")
# password= (and the like) in a query string, a libpq conninfo, an environment dump
# (``PGPASSWORD=``, ``GITHUB_TOKEN=``, ``OPENAI_API_KEY=``), a JSON or dict text
# (``"password": "..."``) or a header (``Authorization: Bearer ...``), quoted or not. A
# key is read whole (possessively, from its start only: linear on any text) and judged
# by `_secret_key`.
_SECRET_WORDS = ("password|passwd|pwd|sslpassword|sslkey_password|token|access_token|"
                 "secret|api_key|apikey|auth")
_KEY = re.compile(r"(?<![A-Za-z0-9_.%/\\-])(?:(-++[A-Za-z][A-Za-z0-9_.-]*+)[ \t]++(?=[^\s=:-])|"
                  r"-*+[A-Za-z][A-Za-z0-9_.-]*+['\"]?[ \t]*+([=:]))")
# A quoted value ends at its quote or at the line's end: in a traceback's source line
# (``print('HF_TOKEN=' + t)``) the quote after ``=`` closes a literal, not a value.
_VALUE = re.compile(r"""[ \t]*+('(?:[^'\\\n]|\\.)*+'?|"(?:[^"\\\n]|\\.)*+"?|"""
                    r"""(?:(?i:bearer|token|basic|bot)[ \t]++)?[^\s&;#'",}\]]++)""")
_AFTER_COLON = frozenset(" \t'\"")  # "key: value", "'key': 'value'"
_BARE_WORDS = frozenset(_SECRET_WORDS.split("|"))
# Words that make a key a secret's wherever they stand in it (``db_password``,
# ``AWS_SECRET_ACCESS_KEY``, ``x-api-key``), and the keys ending in ``token`` that are
# credentials (a lower-case ``pad_token=``, ``eos_token=`` is a tokenizer's).
_SECRET_PARTS = ("password", "passwd", "secret", "api_key", "apikey", "private_key",
                 "credential", "authorization")
_TOKEN_OWNERS = frozenset(
    "access refresh auth api bearer id hf huggingface github gh gitlab session bot oauth "
    "personal_access slack discord webhook npm pypi deploy ci x_auth x_api private "
    "secret".split())
_NOT_CREDENTIAL_TOKENS = frozenset("max min num n total new pad eos bos unk sep cls mask "
                                   "start end stop special image audio video".split())


def _secret_key(key: str, sep: str) -> bool:
    name = key.strip("-'\"").lower().replace("-", "_").replace(".", "_")
    if name in _BARE_WORDS:
        return sep == "=" or name not in ("token", "auth", "pwd", "secret")
    if any(part in name for part in _SECRET_PARTS) or name.endswith(("_auth", "_pwd")):
        return True
    if name.endswith("_token"):
        owner = name[:-len("_token")]
        if key.strip("-'\"").isupper():  # an environment variable: GITHUB_TOKEN, HF_TOKEN
            return owner.rsplit("_", 1)[-1] not in _NOT_CREDENTIAL_TOKENS
        return owner in _TOKEN_OWNERS or owner.rsplit("_", 1)[-1] in _TOKEN_OWNERS
    return key.strip("-'\"").isupper() and name.endswith(("_pass", "pgpassword"))


def _mask_keys(text: str) -> str:
    out: list[str] = []
    pos = 0
    for key in _KEY.finditer(text):
        if key.start() < pos:
            continue
        if key.group(1):  # a command line's option and its value: --api-key KEY
            name, sep = key.group(1), "="
        else:
            name, sep = key.group()[:key.start(2) - key.start()].rstrip(), key.group(2)
        if sep == ":" and ("." in name or text[key.end():key.end() + 1] not in _AFTER_COLON):
            continue  # test_password.py:42:, a nodeid's ::, host:port: no key and value
        if not _secret_key(name, sep):
            continue
        value = _VALUE.match(text, key.end())
        if value is None:
            continue
        out.append(text[pos:value.start(1)] + "***")
        pos = value.end()
    out.append(text[pos:])
    return "".join(out)


_PERCENT_KEY = re.compile(rf"(?i)({_SECRET_WORDS})(%3D)([^\s&;#%]+)")
# Credentials that are recognisable by their shape wherever they stand: an HTTP
# ``Bearer`` value, GitHub, GitLab, Hugging Face, OpenAI-style and Slack
# tokens, and the secret part of Slack and Discord webhook URLs.
_SHAPES = re.compile(
    r"\b(?i:(bearer)\s++)[A-Za-z0-9._~+/=-]{8,}"
    r"|\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,})"
    r"|(hooks\.slack\.com/(?:services|workflows|triggers)/|"
    r"discord(?:app)?\.com/api/webhooks/\d+/|webhook\.office\.com/webhookb2/)[^\s\"'<>?#]+")


def _shape(match: re.Match[str]) -> str:
    if match.group(1):
        return f"{match.group(1)} ***"
    if match.group(2):
        return f"{match.group(2)}***"
    return "***"


def _mask_userinfo(text: str) -> str:
    """Every ``scheme://user:password@`` with the password masked, also where the password
    holds ``@``, ``/``, ``?`` or ``#`` unencoded (the userinfo ends at the URL's last
    ``@``), and a user name alone that is a token (``https://TOKEN@host``)."""
    out: list[str] = []
    pos = 0
    scheme = _SCHEME.search(text)
    while scheme is not None:
        begin = scheme.end()
        end = _URL_END.search(text, begin).start()
        scheme = _SCHEME.search(text, end)  # a scheme inside this URL is this URL's
        url = text[begin:end]
        at = url.rfind("@")
        if at < 0:
            continue
        info = url[:at]
        cut = min((i for i in (info.find(c) for c in "/?#") if i >= 0), default=len(info))
        colon = info.find(":")
        if 0 <= colon < cut:
            tail = info[colon + 1:]
            head = tail[:min((i for i in (tail.find(c) for c in "/?#") if i >= 0),
                             default=len(tail))]
            if head.isdigit() and len(head) < len(tail):
                # host:port/path...@: the "@" is the path's (``u@host:5432/p@x``).
                continue
            out.append(text[pos:begin] + info[:colon] + ":***")
            pos = begin + at
        elif cut == len(info) and _TOKEN_USER.fullmatch(info):
            out.append(text[pos:begin] + "***")
            pos = begin + at
    out.append(text[pos:])
    return "".join(out)


def mask_secrets(text: str) -> str:
    """`text` with every credential in it replaced by ``***``: the password of
    ``scheme://user:password@host`` (special characters unencoded too) and a token as its
    user name, the value of ``password=`` (``passwd``, ``token``, ``secret``...) in a URL
    query, a libpq conninfo or an option (``%3D`` encoded too), an environment variable
    named for a secret (``PGPASSWORD``, ``GITHUB_TOKEN``, ``OPENAI_API_KEY``...), a JSON
    or dict entry (``"api_key": "..."``), an ``Authorization: Bearer`` value, and tokens
    of a known shape (GitHub, GitLab, Hugging Face, OpenAI, Slack; Slack, Discord and
    Teams webhook URLs).

    Every print, log, exception and stored text that may hold a history location or a
    command line goes through this (`gates.store.backend.display_location`, the runner's echo, `gate-report`'s
    output streams)."""
    if "@" in text and "://" in text:
        text = _mask_userinfo(text)
    if "=" in text or ":" in text or "-" in text:
        text = _mask_keys(text)
    if "%3d" in text.lower():
        text = _PERCENT_KEY.sub(r"\1\2***", text)
    text = _SHAPES.sub(_shape, text)
    return text


# ------------------------------------------------------------- output streams

_COMMAND_STARTS = ("::", "##[")  # a workflow command (and the runner's older form)


def neutralise_line(line: str) -> str:
    """A line that the GitHub runner would read as a workflow command (``::`` or ``##[``
    after leading spaces), with a space inside its opening; any other line as it is."""
    body = line.lstrip()
    if not body.startswith(_COMMAND_STARTS):
        return line
    lead = line[:len(line) - len(body)]
    return f"{lead}{body[0]} {body[1:]}"


def clean_text(text: str) -> str:
    """Secrets masked and no line a workflow command. The runner splits a step's output
    at ``\\r`` as well as ``\\n``, so both start a line here."""
    text = mask_secrets(text)
    if "::" not in text and "##[" not in text:
        return text
    return "\n".join("\r".join(neutralise_line(seg) for seg in line.split("\r"))
                     for line in text.split("\n"))


class GuardedStream:
    """A text stream that writes only `clean_text` lines to the stream it wraps.

    Whole lines go out as they complete; ``flush`` sends a partial line too, and
    remembers whether it held only blanks (then the rest still starts the line).
    `raw_stream` reaches the wrapped stream: the one place that emits workflow commands
    on purpose (`gates.report.ghactions` annotations) writes there."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self._pending = ""
        self._blank_so_far = True  # the current output line holds only blanks so far

    def write(self, text: str) -> int:
        data = self._pending + text
        self._pending = ""
        cut = max(data.rfind("\n"), data.rfind("\r"))
        if cut >= 0:
            self._emit(data[:cut + 1])
            data = data[cut + 1:]
        self._pending = data
        return len(text)

    def _emit(self, text: str) -> None:
        if not self._blank_so_far and text:
            # The rest of a line whose start went out at a flush: not a line start.
            head_len = min([i for i in (text.find("\n"), text.find("\r")) if i >= 0],
                           default=len(text)) + 1
            head, text = text[:head_len], text[head_len:]
            self.raw.write(mask_secrets(head))
            self._blank_so_far = True
        if text:
            self.raw.write(clean_text(text))

    def flush(self) -> None:
        if self._pending:
            part, self._pending = self._pending, ""
            body = part.lstrip()
            if self._blank_so_far and any(s.startswith(body) for s in _COMMAND_STARTS):
                self._pending = part  # blanks, ":" or "##": undecided, kept for what follows
            else:
                if self._blank_so_far:
                    self.raw.write(clean_text(part))
                else:
                    self.raw.write(mask_secrets(part))
                self._blank_so_far = False
        self.raw.flush()

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


def raw_stream(stream):
    """The stream under a `GuardedStream` (flushed first), or `stream` itself."""
    if isinstance(stream, GuardedStream):
        stream.flush()
        return stream.raw
    return stream


class guarded_output:
    """``with guarded_output():`` stdout and stderr are `GuardedStream`s inside."""

    def __enter__(self) -> None:
        self.saved = (sys.stdout, sys.stderr)
        sys.stdout = GuardedStream(sys.stdout)
        sys.stderr = GuardedStream(sys.stderr)

    def __exit__(self, *exc: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, GuardedStream):
                stream._blank_so_far = stream._blank_so_far and not stream._pending.strip()
                pending, stream._pending = stream._pending, ""
                try:
                    if pending:
                        stream.raw.write(clean_text(pending) if stream._blank_so_far
                                         else mask_secrets(pending))
                    stream.raw.flush()
                except (OSError, ValueError):  # a reader that left (`| head`), a closed file
                    pass
        sys.stdout, sys.stderr = self.saved
