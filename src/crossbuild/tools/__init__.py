"""The tools models use — the same functions for our agent loop and for outside agents over MCP."""

from .base import ToolResult, Toolset
from .build import BUILD_STATUS, VERIFY
from .command import RUN_COMMAND
from .deps import BUILD_DEPENDENCY
from .files import FILE_TOOLS
from .knowledge import SEARCH_KNOWLEDGE


def default_toolset() -> Toolset:
    """Every tool a cross build needs: files, commands, knowledge, status and verification."""
    return Toolset([*FILE_TOOLS, RUN_COMMAND, SEARCH_KNOWLEDGE, BUILD_DEPENDENCY, BUILD_STATUS, VERIFY])


__all__ = ["ToolResult", "Toolset", "default_toolset"]
