"""Parsers for the site quota tools' real output, and the argv to run each.

    lfs quota -u USER /fs         (Lustre; also -h, and lines wrapped after a long name)
    mmlsquota -Y -u USER DEVICE   (GPFS / Storage Scale; the colon-separated -Y form)
    quota -w -p -u USER           (Linux quota tools, NFS via rquotad)

Block amounts are KiB unless a unit is shown (-h/-s: binary k/M/G/T/P). A value with `*`
is over its soft limit; lfs shows `[n]` when a value is not fully reported. A limit of 0
means "no limit".
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_BINARY = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
_DECIMAL = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_VALUE = re.compile(r"\[?(\d+(?:\.\d+)?)([kKmMgGtTpPeE]?)\]?(\*?)")


@dataclass(frozen=True)
class QuotaReport:
    bytes_used: int
    bytes_soft: int | None
    bytes_hard: int | None
    files_used: int
    files_soft: int | None
    files_hard: int | None
    over: bool = False
    grace: str = ""

    @property
    def bytes_limit(self) -> int | None:
        """What runs out first: the soft limit (writes fail when its grace ends), else hard."""
        return self.bytes_soft or self.bytes_hard

    @property
    def files_limit(self) -> int | None:
        return self.files_soft or self.files_hard


def _amount(token: str, kib: bool) -> tuple[int, bool]:
    """("792.3M", kib) -> bytes, over-soft flag. Bare numbers are KiB for blocks."""
    match = _VALUE.fullmatch(token)
    if not match:
        raise ValueError(f"not a quota value: {token!r}")
    number, unit, star = float(match.group(1)), match.group(2).upper(), bool(match.group(3))
    if kib:
        return int(number * (_BINARY[unit] if unit else 1024)), star
    return int(number * _DECIMAL.get(unit, 1)), star


def _limit(value: int) -> int | None:
    return value or None


def _is_value(token: str) -> bool:
    return _VALUE.fullmatch(token) is not None


def parse_lfs_quota(text: str) -> QuotaReport:
    """`lfs quota [-h] -u USER /fs`: the first filesystem row after the header."""
    tokens = _rows_after_header(text)
    for row in tokens:
        if len(row) >= 8 and _is_value(row[0]) and _is_value(row[1]):
            return _lfs_row(row)
    raise ValueError("no quota row in lfs quota output")


def _rows_after_header(text: str) -> list[list[str]]:
    """Value rows with the filesystem name dropped; a name alone on its line (lfs wraps long
    names) joins the next line."""
    rows, header_seen, carry = [], False, False
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "Filesystem":
            header_seen = True
            continue
        if not header_seen:
            continue
        if len(parts) == 1 and not _is_value(parts[0]):
            carry = True
            continue
        rows.append(parts if carry else parts[1:])
        carry = False
    return rows


def _lfs_row(row: Sequence[str]) -> QuotaReport:
    used, over_b = _amount(row[0], kib=True)
    soft, _ = _amount(row[1], kib=True)
    hard, _ = _amount(row[2], kib=True)
    files, over_f = _amount(row[4], kib=False)
    fsoft, _ = _amount(row[5], kib=False)
    fhard, _ = _amount(row[6], kib=False)
    grace = " ".join(g for g in (row[3], row[7]) if g not in ("-", "none"))
    return QuotaReport(used, _limit(soft), _limit(hard), files, _limit(fsoft), _limit(fhard),
                       over_b or over_f, grace)


def parse_mmlsquota_y(text: str, quota_type: str = "USR", name: str | None = None) -> QuotaReport:
    """`mmlsquota -Y ...`: rows read by the HEADER's field names (KiB blocks)."""
    header: list[str] | None = None
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) < 3 or fields[0] != "mmlsquota":
            continue
        if fields[2] == "HEADER":
            header = fields
            continue
        if header is None:
            continue
        row = dict(zip(header, fields, strict=False))  # rows may end in empty fields
        if row.get("quotaType", quota_type) != quota_type:
            continue
        if name is not None and name not in (row.get("name"), row.get("filesetname"), row.get("id")):
            continue
        return _mm_row(row)
    raise ValueError(f"no {quota_type} row in mmlsquota -Y output")


def _mm_row(row: dict[str, str]) -> QuotaReport:
    def num(key: str) -> int:
        return int(float(row.get(key) or 0))
    kib = 1024
    grace = " ".join(g for g in (row.get("blockGrace", ""), row.get("filesGrace", ""))
                     if g and g != "none")
    used, soft, hard = num("blockUsage") * kib, num("blockQuota") * kib, num("blockLimit") * kib
    files, fsoft, fhard = num("filesUsage"), num("filesQuota"), num("filesLimit")
    over = bool((soft and used > soft) or (fsoft and files > fsoft))
    return QuotaReport(used, _limit(soft), _limit(hard), files, _limit(fsoft), _limit(fhard),
                       over, grace)


def parse_quota_w(text: str, filesystems: Sequence[str] = ()) -> QuotaReport | None:
    """`quota -w [-p] [-s] -u USER`: the row of one of `filesystems` (a mount's source or
    mount point; any row when empty). None when the user has no quota ("...: none").
    Without -p a grace column appears only after a value over its soft limit (`*`)."""
    if re.search(r"^Disk quotas for .*: none\s*$", text, re.MULTILINE):
        return None
    header_seen = False
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["Filesystem"]:
            header_seen = True
        elif header_seen and len(parts) >= 7 and (not filesystems or parts[0] in filesystems):
            return _quota_row(parts[1:])
    raise ValueError("no matching row in quota output")


def _quota_row(values: list[str]) -> QuotaReport:
    used, over_b = _amount(values[0], kib=True)
    soft, hard = _amount(values[1], kib=True)[0], _amount(values[2], kib=True)[0]
    rest = values[3:]
    grace = []
    if over_b or len(values) == 8:  # a grace column follows the block limits
        grace.append(rest.pop(0))
    files, over_f = _amount(rest[0], kib=False)
    fsoft, fhard = _amount(rest[1], kib=False)[0], _amount(rest[2], kib=False)[0]
    grace.extend(rest[3:4])
    grace_text = " ".join(g for g in grace if g not in ("0", "none", "-"))
    return QuotaReport(used, _limit(soft), _limit(hard), files, _limit(fsoft), _limit(fhard),
                       over_b or over_f, grace_text)


def lfs_argv(user: str, path: str) -> list[str]:
    return ["lfs", "quota", "-u", user, path]


def mmlsquota_argv(user: str, device: str, fileset: str | None) -> list[str]:
    if fileset:
        return ["mmlsquota", "-Y", "-j", fileset, device]
    return ["mmlsquota", "-Y", "-u", user, device]


def quota_argv(user: str) -> list[str]:
    return ["quota", "-w", "-p", "-u", user]
