"""Loading and validating watchdogs.toml."""
from watchdogs.config.loader import load_config
from watchdogs.config.model import (
    AlertSettings,
    CheckConfig,
    Config,
    CronPeriods,
    NotifyConfig,
    SchedulerSettings,
)
from watchdogs.config.source import find_config_path

__all__ = [
    "AlertSettings", "CheckConfig", "Config", "CronPeriods", "NotifyConfig",
    "SchedulerSettings", "find_config_path", "load_config",
]
