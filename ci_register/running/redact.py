"""Credentials out of every text a person or a log sees (stdlib only).

`ci_register` echoes command lines that may carry a history URL, and `gates` prints
history locations and errors; both mask through `mask_secrets` (ci_register never imports
gates, so it lives here).
"""

from __future__ import annotations

import functools
import html
import os
import re
import sys
from collections.abc import Mapping

__all__ = ["GuardedStream", "clean_text", "environment_secrets", "guarded_output",
           "html_text", "mask_secrets", "masked_shown", "neutralise_line", "raw_stream",
           "show_controls", "slack_code", "slack_text"]

# A URL's scheme; its userinfo is read by `_mask_userinfo` (no regex backtracking).
# A scheme starts after any character that cannot be in one (``test_postgresql://``
# in a parametrized test's id, not only at a word's start).
_SCHEME = re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://")
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
                  r"-*+[A-Za-z][A-Za-z0-9_.-]*+(?:\\?['\"])?[ \t]*+([=:]))")
# A quoted value ends at its quote or at the line's end: in a traceback's source line
# (``print('HF_TOKEN=' + t)``) the quote after ``=`` closes a literal, not a value.
# JSON inside a JSON string (a report's JSON, a log line of json.dumps) quotes with \":
# such a value ends at the next \".
_VALUE = re.compile(r"""[ \t]*+('(?:[^'\\\n]|\\.)*+'?|"(?:[^"\\\n]|\\.)*+"?|"""
                    r"""\\"(?:[^\\\n]|\\[^"\n])*+(?:\\")?|"""
                    r"""(?:(?i:bearer|token|basic|bot)[ \t]++)?[^\s&;#'",}\]]++)""")
_AFTER_COLON = frozenset(" \t'\"\\")  # "key: value", "'key': 'value'"
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


# Keys ending in ``key`` that hold a credential (``service_key``, ``signing_key``); an
# upper-case one (``MY_SERVICE_KEY``, an environment variable) does unless it names a
# table's or a map's key (``SORT_KEY``, ``METRIC_KEY``: `register_ci_gate(metric_key=)`).
_KEY_OWNERS = frozenset(
    "access secret private service signing encryption master auth client license app "
    "account ssh deploy session api webhook hmac jwt storage sas subscription "
    "consumer".split())
_NOT_CREDENTIAL_KEYS = frozenset("metric sort primary foreign cache partition hash index "
                                 "row group lookup map dict column table field public "
                                 "hot short routing idempotency dedupe".split())


def _secret_key(key: str, sep: str) -> bool:
    quoted = key.endswith(("'", '"'))  # "pass": ..., also \"pass\": ...
    name = key.strip("-'\"\\").lower().replace("-", "_").replace(".", "_")
    if name in _BARE_WORDS:
        return sep == "=" or name not in ("token", "auth", "pwd", "secret")
    if any(part in name for part in _SECRET_PARTS) or name.endswith(("_auth", "_pwd")):
        return True
    if name == "pass":  # "pass": "x", pass=x; never Python's statement
        return sep == "=" or quoted
    if name.endswith("_pass"):  # "db_pass": "x", DB_PASS=x
        return True
    if name.endswith("_key"):
        owner = name[:-len("_key")].rsplit("_", 1)[-1]
        if key.strip("-'\"\\").isupper():
            return owner not in _NOT_CREDENTIAL_KEYS
        return owner in _KEY_OWNERS
    if name.endswith("_token"):
        owner = name[:-len("_token")]
        if key.strip("-'\"\\").isupper():  # an environment variable: GITHUB_TOKEN, HF_TOKEN
            return owner.rsplit("_", 1)[-1] not in _NOT_CREDENTIAL_TOKENS
        return owner in _TOKEN_OWNERS or owner.rsplit("_", 1)[-1] in _TOKEN_OWNERS
    return key.strip("-'\"\\").isupper() and name.endswith("pgpassword")


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


# A netrc entry (``machine host login u password X``, one line or several): where a
# ``machine``/``login`` word stands in the text, the word after ``password`` is one.
_NETRC_MARK = re.compile(r"(?<!\S)(?:machine|login|default)[ \t\r\n]")
# The value ends at a blank or at a quote or backslash: inside a quoted string (JSON, a
# repr) those close or escape the string around it, not the password.
_NETRC_VALUE = re.compile(
    r"""(?<!\S)((?:password|passwd|account)[ \t]++)("[^"\n]*+"?|[^\s"'\\]++)""")


def _mask_netrc(text: str) -> str:
    return _NETRC_VALUE.sub(lambda m: m.group(0) if m.group(2) == "***"
                            else f"{m.group(1)}***", text)


# Values shorter than this are not masked where they stand alone (a variable named for a
# secret that holds "1" or "true" would mask every digit).
MIN_ENV_SECRET = 6


@functools.lru_cache(maxsize=4096)
def _secret_variable(name: str) -> bool:
    """An environment variable named for a secret: the `_secret_key` rule for ``NAME=``
    (``PWD`` is the shell's working directory, not a password)."""
    return bool(name) and name.upper() not in ("PWD", "OLDPWD") and _secret_key(name, "=")


def _secret_values(env: Mapping[str, str]) -> list[str]:
    values = {v for k, v in env.items()
              if len(v.strip()) >= MIN_ENV_SECRET and _secret_variable(k)}
    return sorted(values, key=len, reverse=True)


_env_seen: tuple[dict[bytes, bytes], list[str]] | None = None


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of this process's secret-named environment variables (``GITHUB_TOKEN``,
    ``PGPASSWORD``, ``MY_SERVICE_KEY``...), longest first: masked wherever they appear,
    also where no key stands beside them.

    Read again only when the environment changed: decoding it costs ~80 us a call, and
    every line of output and every report cell is masked (a copy of its encoded items,
    compared in C, tells a change in ~1 us)."""
    global _env_seen
    if environ is not None:
        return _secret_values(environ)
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return _secret_values(os.environ)
    if _env_seen is None or _env_seen[0] != data:
        _env_seen = (dict(data), _secret_values(os.environ))
    return _env_seen[1]


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
    output streams).

    Secrets are also masked by structure: a netrc entry's ``password``, the values of
    keys named for a secret in ``k=v``, ``k: v``, JSON and Python reprs (``"db_pass"``,
    ``'MY_SERVICE_KEY'``), and the value of every secret-named environment variable of
    this process wherever it appears (`environment_secrets`)."""
    for value in environment_secrets():
        if value in text:
            text = text.replace(value, "***")
    if "@" in text and "://" in text:
        text = _mask_userinfo(text)
    if "=" in text or ":" in text or "-" in text:
        text = _mask_keys(text)
    if "%3d" in text.lower():
        text = _PERCENT_KEY.sub(r"\1\2***", text)
    if "pass" in text or "account" in text:
        if _NETRC_MARK.search(text):
            text = _mask_netrc(text)
    text = _SHAPES.sub(_shape, text)
    return text


# ------------------------------------------------------- invisible characters

# Control and format characters a reader cannot see or that reorder what they see: C0 and
# C1 controls (ESC starts a terminal sequence), bidi overrides and isolates (U+202E shows
# ``test_fdp.exe`` for ``test_exe.pdf``), zero widths, line and paragraph separators,
# Unicode tags (invisible text), lone surrogates. Tab, newline and CR are kept by
# `show_controls` (the layout's own); each destination decides about them.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\ud800-\udfff]")
_LAYOUT = re.compile("[\t\n\r]")


def _escape(match: re.Match[str]) -> str:
    # JSON's and Python's escape alike (``\\u001b``; a surrogate pair past U+FFFF): a
    # JSON text stays JSON with its invisibles shown.
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xd800 + (code >> 10):04x}\\u{0xdc00 + (code & 0x3ff):04x}"


# A number with or without a unit (most of a report's cells): no secret, no invisible.
_PLAIN_NUMBER = re.compile(r"[0-9 .,%+\-\u2212\u00d7()\[\]/|~<>]*(?: [A-Za-z/%]{1,8})?")
_memo: dict[str, str] = {}
_memo_env: list[str] | None = None
_MEMO_CAP = 100_000  # entries of at most 200 characters; a 10,000-metric report repeats
# most of its 140,000 Markdown cells (verdict names, p/q, nodeids)


def masked_shown(text: str) -> str:
    """``show_controls(mask_secrets(text))``, remembered per text (a report's cells repeat:
    verdicts, nodeids, p/q) until the environment's secrets change; a plain number
    is taken as it is."""
    global _memo_env
    if _PLAIN_NUMBER.fullmatch(text):
        return text
    env = environment_secrets()
    if env is not _memo_env:
        _memo.clear()
        _memo_env = env
    shown = _memo.get(text)
    if shown is None:
        shown = show_controls(mask_secrets(text))
        if len(_memo) < _MEMO_CAP and len(text) <= 200:
            _memo[text] = shown
    return shown


def show_controls(text: str, *, layout: bool = False) -> str:
    """`text` with every invisible or reordering character shown as its escape
    (``\\u202e``, ``\\u001b``); with ``layout=True`` tab, newline and CR too (a field
    that must stay on one line: a table cell, a chat line)."""
    text = _INVISIBLE.sub(_escape, text)
    return _LAYOUT.sub(_escape, text) if layout else text


# ------------------------------------------------------- each destination's rule

# Slack's own escaping: with ``&``, ``<`` and ``>`` as entities no ``<!channel>``,
# ``<!here>``, ``<@U123>`` mention and no ``<https://x|label>`` link survives in mrkdwn.
_SLACK = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def slack_text(text: object) -> str:
    """Untrusted text for a Slack mrkdwn field: secrets masked, invisibles and line
    breaks shown as escapes, mentions and links inert (`_SLACK`)."""
    return show_controls(mask_secrets(str(text)), layout=True).translate(_SLACK)


def slack_code(text: object) -> str:
    """`slack_text` inside a `` `code` `` span: a backtick in it cannot close the span."""
    return "`" + slack_text(text).replace("`", "'") + "`"


def html_text(text: object) -> str:
    """Untrusted text for HTML (text or a quoted attribute): secrets masked, invisibles
    shown, then ``& < > " '`` as entities."""
    return html.escape(masked_shown(str(text)), quote=True)


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
    """Secrets masked, invisible characters shown (`show_controls`) and no line a
    workflow command: the console's rule. The runner splits a step's output at ``\\r`` as
    well as ``\\n``, so both start a line here."""
    text = show_controls(mask_secrets(text))
    if "::" not in text and "##[" not in text:
        return text
    return "\n".join("\r".join(neutralise_line(seg) for seg in line.split("\r"))
                     for line in text.split("\n"))


def _mask_and_show(text: str) -> str:
    """The rest of a line whose start went out already: masked, invisibles shown."""
    return show_controls(mask_secrets(text))


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
            self.raw.write(_mask_and_show(head))
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
                    self.raw.write(_mask_and_show(part))
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
                                         else _mask_and_show(pending))
                    stream.raw.flush()
                except (OSError, ValueError):  # a reader that left (`| head`), a closed file
                    pass
        sys.stdout, sys.stderr = self.saved
