"""`autopass.toml`: one typed model (model.py), read and validated by loading.py, and
the texts generated from the model (starter.py: `autopass init`'s file, the reference)."""

from autopass_build.config.loading import (
    check_given,
    find,
    key_of,
    load,
    parse,
    with_overrides,
)
from autopass_build.config.model import (
    CHECK_MODES,
    SECTIONS,
    AgentConfig,
    BuildConfig,
    CheckConfig,
    ClusterConfig,
    Config,
    ConfigError,
    MeasureConfig,
    RunConfig,
    TuneConfig,
)
from autopass_build.config.starter import reference_markdown, starter_text
from autopass_build.core.names import CONFIG_NAME, METRICS

__all__ = ["CHECK_MODES", "CONFIG_NAME", "METRICS", "SECTIONS", "AgentConfig", "BuildConfig",
           "CheckConfig", "ClusterConfig",
           "Config", "ConfigError", "MeasureConfig", "RunConfig", "TuneConfig",
           "check_given", "find", "key_of", "load", "parse", "reference_markdown", "starter_text", "with_overrides"]
