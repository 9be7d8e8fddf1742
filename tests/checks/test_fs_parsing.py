"""Pure parts of the filesystem side: the quota tools' outputs (recorded fixtures), the
forecast on synthetic histories, mountinfo, and the choice of source."""
from __future__ import annotations

from pathlib import Path

import pytest

from watchdogs.fsprobe.forecast import DAY, fit_rate, forecast
from watchdogs.fsprobe.mounts import mount_of, parse_mountinfo
from watchdogs.fsprobe.quota import QuotaReport, parse_lfs_quota, parse_mmlsquota_y, parse_quota_w
from watchdogs.fsprobe.usage import auto_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "quota"
KiB, GiB = 1024, 1024**3


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_lfs_quota_plain_and_human_agree() -> None:
    plain = parse_lfs_quota(fixture("lfs_quota_u.txt"))
    human = parse_lfs_quota(fixture("lfs_quota_uh.txt"))
    assert plain == QuotaReport(4718592 * KiB, 5 * GiB, 6 * GiB, 120345, 1000000, 1200000)
    assert (human.bytes_used, human.bytes_soft, human.bytes_hard) == (int(4.5 * GiB), 5 * GiB, 6 * GiB)
    assert plain.bytes_limit == 5 * GiB and plain.files_limit == 1000000


def test_lfs_quota_wrapped_long_name_over_soft_limit_in_grace() -> None:
    report = parse_lfs_quota(fixture("lfs_quota_wrapped_over.txt"))
    assert report.bytes_used == 5452595 * KiB and report.over
    assert report.grace == "6d23h59m58s"


def test_lfs_quota_values_in_brackets_and_zero_limits_mean_none() -> None:
    report = parse_lfs_quota(fixture("lfs_quota_brackets.txt"))
    assert report.bytes_used == 1041408 * KiB and report.files_used == 0
    assert report.files_soft is None and report.files_hard is None


def test_lfs_quota_error_text_is_not_a_report() -> None:
    with pytest.raises(ValueError):
        parse_lfs_quota("lfs quota: '/home/x' not on a mounted Lustre filesystem\n")


def test_mmlsquota_y_reads_the_user_row_by_header_names() -> None:
    report = parse_mmlsquota_y(fixture("mmlsquota_Y.txt"), "USR", "alice")
    assert report == QuotaReport(9961472 * KiB, 10 * GiB, 12 * GiB, 4000, None, 500000, False, "")


def test_mmlsquota_y_fileset_over_its_file_soft_limit() -> None:
    report = parse_mmlsquota_y(fixture("mmlsquota_Y_fileset.txt"), "FILESET", "proj7")
    assert report.files_used == 912345 and report.files_soft == 900000 and report.over
    assert report.grace == "6 days"


def test_quota_w_without_grace_columns_when_under_quota() -> None:
    report = parse_quota_w(fixture("quota_w.txt"), ("nfs01:/export/home",))
    assert report == QuotaReport(8123456 * KiB, 10000000 * KiB, 12000000 * KiB, 4567, None, None)


def test_quota_w_grace_column_appears_after_a_value_over_its_soft_limit() -> None:
    report = parse_quota_w(fixture("quota_w_over.txt"))
    assert report is not None and report.over and report.grace == "6days"
    assert report.files_used == 4567


def test_quota_w_p_picks_the_row_of_the_mount() -> None:
    report = parse_quota_w(fixture("quota_w_p.txt"), ("/dev/sdc1", "/data"))
    assert report is not None and report.bytes_used == 100 * KiB and report.bytes_limit is None
    first = parse_quota_w(fixture("quota_w_p.txt"), ("/dev/sdb1",))
    assert first is not None and first.files_soft == 50000


def test_quota_w_user_without_quota() -> None:
    assert parse_quota_w(fixture("quota_none.txt")) is None


def linear(start: float, per_hour: float, hours: int, now: float) -> list[tuple[float, float]]:
    return [(now - (hours - h) * 3600, start + per_hour * h) for h in range(hours + 1)]


def test_forecast_on_a_steady_history() -> None:
    now = 1_000_000.0
    history = linear(50.0, 2.0, 24, now)  # 2 units an hour, at 98 now
    found = forecast(history, capacity=200.0, now=now)
    assert found is not None
    assert found.rate == pytest.approx(2.0 / 3600)
    assert found.seconds_to_full == pytest.approx(51 * 3600)
    assert found.describe() == "full in ~2 d 03 h at the rate of the last 1 d 00 h"


def test_forecast_ignores_what_is_older_than_the_window() -> None:
    now = 1_000_000.0
    old_spike = [(now - 3 * DAY + h * 60, 10.0 * h) for h in range(10)]
    flat = [(now - h * 3600, 80.0) for h in range(12)]
    found = forecast(old_spike + flat, capacity=100.0, now=now)
    assert found is not None and found.seconds_to_full is None
    assert found.describe() == "not growing at the rate of the last 1 d 00 h"


def test_forecast_through_noise_and_when_already_full() -> None:
    now = 1_000_000.0
    noisy = [(t, v + (3 if i % 2 else -3)) for i, (t, v) in enumerate(linear(0.0, 1.0, 24, now))]
    assert fit_rate(noisy) == pytest.approx(1.0 / 3600, rel=0.1)
    full = forecast(linear(90.0, 1.0, 24, now), capacity=100.0, now=now)
    assert full is not None and full.seconds_to_full == 0 and full.describe() == "full"


def test_no_forecast_from_too_little_history() -> None:
    now = 1_000_000.0
    assert forecast([(now, 5.0)], 100.0, now) is None
    assert forecast([(now - 600, 1.0), (now, 5.0)], 100.0, now) is None  # 10 minutes: too short


MOUNTINFO = """\
22 1 0:21 / / rw,relatime - overlay overlay rw
30 22 0:40 / /lustre rw,relatime - lustre 10.0.0.1@o2ib:/scratch rw,flock
31 22 0:41 / /gpfs/proj rw,relatime - gpfs gpfs01 rw
32 22 0:42 / /mnt/my\\040data rw - tmpfs tmpfs rw
"""


def test_mountinfo_finds_the_filesystem_holding_a_path() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert mount_of("/lustre/alice/run", mounts).fs_type == "lustre"
    assert mount_of("/lustrex/a", mounts).fs_type == "overlay"
    assert mount_of("/mnt/my data/x", mounts).mount_point == "/mnt/my data"
    assert mount_of("/gpfs/proj", mounts).source == "gpfs01"


def test_automatic_source_prefers_the_site_quota_tool() -> None:
    assert auto_source("lustre", False) == "lfs"
    assert auto_source("gpfs", False) == "mmlsquota"
    assert auto_source("ext4", True) == "scan"
    assert auto_source("nfs", False) == "statvfs"
