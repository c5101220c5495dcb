"""crossbuild's settings, in the layers cross-rs documents: command line > environment (CROSSBUILD_*) > the project
file (crossbuild.toml) > the user file (~/.config/crossbuild/config.toml).

pydantic-settings reads the environment and validates the merged result (the files are TOML, read here so that their
relative paths resolve against their own folder); each value remembers the layer it came from, for
`crossbuild config show`. The project file is the nearest `crossbuild.toml` in the current folder or its parents (as
cargo finds its config), or the one `--config` names. Any such file may have come with a download (a project, an
unpacked bundle, a folder above), so it may set only what cannot widen access (PROJECT_KEYS; budgets only lowered):
a model, base URL, passed-through variable, dependency source, sandbox mode or proof bar (`require`) comes from the
command line, the environment or the user's own file. A key a project file may not set is ignored and named in a
warning. Longer than 350 lines: the model, its layers and the project-file rule are one job, read together.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, SettingsConfigDict, SettingsError

from crossbuild.foundation.targets import UnknownTargetError, parse_target

PROJECT_FILE = "crossbuild.toml"
ENV_PREFIX = "CROSSBUILD_"
DEFAULT = "default"
SANDBOX_MODES = ("auto", "bubblewrap", "none")
# What a project file may set: keys that change what is built, never what a build or a model may reach. Everything
# else (model, base_url, env_passthrough, dependencies, sandbox, provider tables) widens access and is the user's.
PROJECT_KEYS = frozenset({"targets", "jobs", "keep_features", "keep_libc", "target", "budgets"})

# Variables a build must never receive from the user's environment: credentials, and the ones that make the loader
# or an interpreter run other code.
_SECRET_LIKE = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
_INJECTING = re.compile(r"^(LD_|DYLD_|PYTHON|PERL5|RUBY|NODE_OPTIONS$|BASH_ENV$|ENV$|GCONV_PATH$|MAKESHELL$|"
                        r"CONFIG_SHELL$|SHELLOPTS$|PS4$)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """A settings file or variable that cannot be used; the message names it and says what to change."""


class TargetSettings(BaseModel):
    """Extra arguments for one target, added after the toolchain's own when the project (never a dependency) is
    configured."""

    model_config = ConfigDict(extra="forbid")
    cmake_args: list[str] = []
    meson_args: list[str] = []
    configure_args: list[str] = []

    def extra_args(self) -> dict[str, tuple[str, ...]]:
        return {k: tuple(v) for k, v in (("cmake", self.cmake_args), ("meson", self.meson_args),
                                           ("configure", self.configure_args)) if v}


class BudgetSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_steps: PositiveInt = 60
    max_tool_calls: PositiveInt = 250
    max_tokens: PositiveInt = 3_000_000
    max_wall_s: PositiveFloat = 3 * 3600
    max_cost_usd: PositiveFloat | None = 5.0


class ProviderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_key: str | None = None


def _comma_list(value: Any) -> Any:
    """CROSSBUILD_TARGETS=aarch64-linux-musl,riscv64-linux-musl (a TOML array stays as it is)."""
    return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value


class Settings(BaseModel):
    """Everything a settings layer may set, validated once the layers are merged (a plain model: the layers are read
    before, the environment by `_FromEnvironment`). Unknown keys are errors, so a typo never silently does nothing."""

    model_config = ConfigDict(extra="forbid")

    targets: Annotated[list[str], NoDecode] = Field(default=[], description="targets built when --target is absent")
    model: str = "planner"
    base_url: str | None = None
    jobs: PositiveInt | None = None
    keep_features: bool = False
    keep_libc: bool = False
    sandbox: Literal["auto", "bubblewrap", "none"] = Field(
        default="auto", description="auto: bubblewrap, refusing to build without it; none: no isolation, by choice")
    require: Literal["tested", "exercised", "built"] = Field(
        default="exercised", description="the proof level below which a verified build still exits 1")
    env_passthrough: Annotated[list[str], NoDecode] = Field(
        default=[], description="names of the user's variables a build may see (never credentials)")
    budgets: BudgetSettings = BudgetSettings()
    target: dict[str, TargetSettings] = Field(default={}, description="per-target extra arguments")
    dependencies: dict[str, str] = Field(default={}, description="NAME = local folder or tarball you vouch for")
    openai: ProviderSettings = ProviderSettings()
    anthropic: ProviderSettings = ProviderSettings()

    _split = field_validator("targets", "env_passthrough", mode="before")(_comma_list)

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, names: list[str]) -> list[str]:
        return [_target_name(n) for n in names]

    @field_validator("target")
    @classmethod
    def _known_target_keys(cls, tables: dict[str, TargetSettings]) -> dict[str, TargetSettings]:
        return {_target_name(k): v for k, v in tables.items()}

    @field_validator("env_passthrough")
    @classmethod
    def _no_secrets(cls, names: list[str]) -> list[str]:
        for n in names:
            if not _ENV_NAME.match(n):
                raise ValueError(f"{n!r} is not a variable name")
            if _SECRET_LIKE.search(n):
                raise ValueError(f"{n} looks like a credential; a build never gets those")
            if _INJECTING.match(n):
                raise ValueError(f"{n} changes how programs load or start; a build never gets it")
        return list(dict.fromkeys(names))


def _target_name(name: str) -> str:
    try:
        return parse_target(name).name
    except UnknownTargetError as e:
        raise ValueError(str(e)) from None


@dataclass(frozen=True)
class Resolved:
    """The merged settings and, for each dotted key that any layer set, the layer that won."""

    settings: Settings
    origins: dict[str, str] = field(default_factory=dict)
    files: tuple[Path, ...] = ()
    ignored: tuple[str, ...] = ()  # "FILE: KEY ..." for each key a project file set that it may not

    def origin(self, key: str) -> str:
        return self.origins.get(key, DEFAULT)

    def passthrough_env(self, environ: dict[str, str] | None = None) -> dict[str, str]:
        """The allowed variables that are set in ENVIRON (default: this process's environment)."""
        environ = os.environ if environ is None else environ
        return {n: environ[n] for n in self.settings.env_passthrough if n in environ}

    def target_args(self, target_name: str) -> dict[str, tuple[str, ...]]:
        table = self.settings.target.get(target_name)
        return table.extra_args() if table else {}


def user_file() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "crossbuild" / "config.toml"


def find_project_file(start: Path | None = None) -> Path | None:
    """The nearest crossbuild.toml in START (default: the current folder) or a parent."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def load(cli: dict[str, Any] | None = None, *, project: Path | None = None, use_files: bool = True) -> Resolved:
    """Merge the layers, lowest first. CLI holds only the options given on the command line (dotted keys allowed:
    "budgets.max_steps"). PROJECT overrides the search for crossbuild.toml; USE_FILES=False reads no file (the
    evaluation's cells, which must not depend on who runs them). Raises ConfigError."""
    layers: list[tuple[str, dict[str, Any]]] = []
    files: list[Path] = []
    ignored: list[str] = []
    if use_files:
        user = user_file()
        if user.is_file():
            layers.append((str(user), _read_file(user, project_file=False)))
            files.append(user)
        if project is not None and not project.is_file():
            raise ConfigError(f"{project}: no such config file")
        found = project or find_project_file()
        if found is not None and found.resolve() != user.resolve():
            data, dropped = _project_safe(_read_file(found, project_file=True), _budgets_below(layers))
            layers.append((str(found), data))
            files.append(found)
            ignored += [f"{found}: {what}" for what in dropped]
    layers.append(("environment", _read_environment()))
    layers.append(("command line", _nest(cli or {})))
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, data in layers:
        _merge(merged, _canonical_target_tables(data, name), name, origins)
    origins = {k: f"${ENV_PREFIX}{k.upper().replace('.', '__')}" if o == "environment" else o
               for k, o in origins.items()}
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as e:
        raise ConfigError(_one_line(e, origins)) from None
    return Resolved(settings, origins, tuple(files), tuple(ignored))


def _budgets_below(layers: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The budgets the user file and the defaults give, which a project file may lower but not raise."""
    user = next((d["budgets"] for _, d in layers if isinstance(d.get("budgets"), dict)), {})
    return BudgetSettings().model_dump() | user


def _project_safe(data: dict[str, Any], budgets: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """DATA without the keys a project file may not set, and a line for each one left out."""
    widening = set(Settings.model_fields) - PROJECT_KEYS  # unknown keys stay, to be named as typos
    kept = {k: v for k, v in data.items() if k not in widening}
    dropped = [f"{k} (only the command line, CROSSBUILD_* variables or {user_file()} may set it)"
               for k in data if k in widening]
    if isinstance(kept.get("budgets"), dict):
        lowered = {}
        for key, value in kept["budgets"].items():
            limit = budgets.get(key)
            try:  # as it will be read: "100000" is 100000 (a value that cannot be read fails validation later)
                value = BudgetSettings.model_validate({key: value}).model_dump()[key]
            except ValidationError:
                pass
            if isinstance(value, int | float) and isinstance(limit, int | float) and value > limit:
                dropped.append(f"budgets.{key} = {value} (a project file may lower a budget, not raise it: {limit})")
            else:
                lowered[key] = value
        kept["budgets"] = lowered
    return kept, dropped


def _read_file(path: Path, *, project_file: bool) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    for provider in ("openai", "anthropic"):
        if project_file and isinstance(data.get(provider), dict) and "api_key" in data[provider]:
            raise ConfigError(f"{path}: [{provider}] api_key does not belong in a project file (it would be committed "
                              f"with the project); put it in {user_file()} or the environment")
    deps = data.get("dependencies")
    # paths are relative to the file that names them, and must exist now (a project file's are ignored)
    if isinstance(deps, dict) and not project_file:
        resolved = {}
        for name, where in deps.items():
            if not isinstance(where, str):
                raise ConfigError(f"{path}: dependencies.{name} must be a path (a folder or a tarball)")
            real = (path.parent / Path(where).expanduser()).resolve()
            if not real.exists():
                raise ConfigError(f"{path}: dependencies.{name} = {where!r}: {real} does not exist")
            resolved[name] = str(real)
        data["dependencies"] = resolved
    return data


class _FromEnvironment(BaseSettings):
    """What a CROSSBUILD_* variable may set, read as text and validated with the other layers. Not the `target`
    tables (CROSSBUILD_TARGET is what crossbuild itself sets inside builds and `crossbuild env --shell` exports),
    not the dependencies or keys, and not `model`: CROSSBUILD_MODEL keeps the meaning it had before settings files,
    the LLM that `--model auto` hands over to."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore")
    targets: str | None = None
    base_url: str | None = None
    jobs: str | None = None
    keep_features: str | None = None
    keep_libc: str | None = None
    sandbox: str | None = None
    require: str | None = None
    env_passthrough: str | None = None
    budgets: dict[str, str] | None = None


def _read_environment() -> dict[str, Any]:
    """CROSSBUILD_TARGETS, CROSSBUILD_JOBS, CROSSBUILD_BUDGETS__MAX_STEPS, ...: pydantic-settings' own reading."""
    try:
        found = EnvSettingsSource(_FromEnvironment)()
    except SettingsError as e:
        raise ConfigError(f"a CROSSBUILD_* variable cannot be read: {e}") from None
    return {k: v for k, v in found.items() if v is not None}


def _canonical_target_tables(data: dict[str, Any], layer: str) -> dict[str, Any]:
    """[target.arm64] and [target.aarch64-linux-gnu] are one table: keys become canonical before layers merge."""
    tables = data.get("target")
    if not isinstance(tables, dict):
        return data
    out: dict[str, Any] = {}
    for name, table in tables.items():
        try:
            out[_target_name(name)] = table
        except ValueError as e:
            raise ConfigError(f"[target.{name}] in {layer}: {e}") from None
    return {**data, "target": out}


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None:
            continue
        *parents, last = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


def _merge(into: dict[str, Any], data: dict[str, Any], layer: str, origins: dict[str, str], at: str = "") -> None:
    """Tables merge key by key; any other value (lists included) replaces the lower layer's."""
    for key, value in data.items():
        dotted = f"{at}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value, layer, origins, dotted + ".")
        elif isinstance(value, dict):
            into[key] = {}
            _merge(into[key], value, layer, origins, dotted + ".")
        else:
            into[key] = value
            origins[dotted] = layer


def _one_line(error: ValidationError, origins: dict[str, str]) -> str:
    first = error.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    where = origins.get(key) or next((o for k, o in origins.items() if k.startswith(key + ".")), None)
    what = "unknown setting" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{key}: {what}" + (f" (from {where})" if where else "") + more


def flat(settings: Settings) -> dict[str, Any]:
    """Dotted keys and values, for printing; API keys are shown only as set or not."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif prefix.endswith("api_key"):
            out[prefix] = "(set)" if value else None
        else:
            out[prefix] = value

    walk("", settings.model_dump())
    return out
